package org.sparkccl.core.wait;

/** Throws when waiting on {@code awaitedPeer} can no longer succeed (a peer died, aborted or left). */
@FunctionalInterface
public interface FailureCheck {
    void check(int awaitedPeer, long step, String waitingFor);

    /**
     * Run when the wait was cancelled, before the cancellation is reported: throws where a peer's
     * process is gone, since a caller that kills the remaining ranks of a group when one dies (as
     * Spark does with a barrier stage) makes the death the cause and the cancellation its consequence.
     */
    default void checkDeadPeers(int awaitedPeer, long step, String waitingFor) {
    }
}
