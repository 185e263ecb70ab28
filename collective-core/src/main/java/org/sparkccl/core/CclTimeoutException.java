package org.sparkccl.core;

/** A wait in a collective took longer than {@code SPARKCCL_TIMEOUT_MS}. */
public class CclTimeoutException extends CclException {
    public CclTimeoutException(String message) {
        super(message);
    }
}
