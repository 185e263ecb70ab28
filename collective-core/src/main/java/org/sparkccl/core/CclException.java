package org.sparkccl.core;

/**
 * A collective or communicator failed. The message says what happened, on which rank, and what to
 * do about it. The communicator that threw is unusable afterwards: close it and build a new one.
 */
public class CclException extends RuntimeException {
    public CclException(String message) {
        super(message);
    }

    public CclException(String message, Throwable cause) {
        super(message, cause);
    }
}
