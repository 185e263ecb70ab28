package org.sparkccl.core.wait;

/** Throws when waiting on {@code awaitedPeer} can no longer succeed (a peer died, aborted or left). */
@FunctionalInterface
public interface FailureCheck {
    void check(int awaitedPeer, long step, String waitingFor);
}
