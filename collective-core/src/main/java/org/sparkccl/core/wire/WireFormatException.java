package org.sparkccl.core.wire;

import org.sparkccl.core.CclException;

/**
 * Bytes that a peer, a file or a socket handed over were refused as a {@link WireFormat}: the
 * message names the format, what was expected, what was found and what to do.
 */
public final class WireFormatException extends CclException {
    WireFormatException(String message) {
        super(message);
    }

    WireFormatException(String message, Throwable cause) {
        super(message, cause);
    }
}
