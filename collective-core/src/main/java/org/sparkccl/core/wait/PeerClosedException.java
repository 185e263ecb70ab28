package org.sparkccl.core.wait;

import org.sparkccl.core.CclException;

/**
 * The peer a wait is for closed its communicator. {@link WaitLoop} reports it only if the wait goes
 * on after one more look at its condition: the peer may have met it and closed after the caller's
 * last look.
 */
public final class PeerClosedException extends CclException {
    public PeerClosedException(String message) {
        super(message);
    }
}
