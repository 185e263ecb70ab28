package org.sparkccl.core.wait;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;
import org.sparkccl.core.CclException;
import org.sparkccl.core.PeerFailedException;

/**
 * A cancelled or interrupted wait ends promptly, and names a peer that failed before it: Spark
 * cancels the rest of a barrier stage because one task failed, so that failure is the cause.
 */
class WaitLoopTest {
    private static final FailureCheck ALL_WELL = (peer, step, what) -> { };
    private static final FailureCheck RANK_2_ABORTED = (peer, step, what) -> {
        throw new PeerFailedException(2, "rank 0: rank 2 aborted while this rank waited for " + what);
    };

    @Test
    void aCancelledWaitEndsSayingSo() {
        CclException e = waitUntilItThrows(new WaitLoop(0, 20, 60_000, ALL_WELL, () -> true));
        assertTrue(e.getMessage().contains("rank 0: allReduce #1 cancelled (task killed) while waiting for LL data"
                + " from rank 1 at step 3"), e.getMessage());
    }

    @Test
    void anInterruptedWaitEndsSayingSo() {
        Thread.currentThread().interrupt();
        try {
            CclException e = waitUntilItThrows(new WaitLoop(0, 20, 60_000, ALL_WELL, () -> false));
            assertTrue(e.getMessage().contains("allReduce #1 interrupted while waiting for LL data"), e.getMessage());
        } finally {
            Thread.interrupted();
        }
    }

    @Test
    void aCancelledWaitNamesAPeerThatFailedFirst() {
        CclException e = waitUntilItThrows(new WaitLoop(0, 20, 60_000, RANK_2_ABORTED, () -> true));
        assertEquals(2, ((PeerFailedException) e).failedRank(), e.getMessage());
    }

    @Test
    void anInterruptedWaitNamesAPeerThatFailedFirst() {
        Thread.currentThread().interrupt();
        try {
            CclException e = waitUntilItThrows(new WaitLoop(0, 20, 60_000, RANK_2_ABORTED, () -> false));
            assertEquals(2, ((PeerFailedException) e).failedRank(), e.getMessage());
        } finally {
            Thread.interrupted();
        }
    }

    /** Idles as allReduce #1 waiting for rank 1 at step 3 until the loop throws; within a second. */
    private static CclException waitUntilItThrows(WaitLoop wait) {
        wait.startCollective("allReduce #1");
        long start = System.nanoTime();
        CclException e = assertThrows(CclException.class, () -> {
            while (true) {
                wait.idle(1, 3, "LL data");
            }
        });
        long ms = (System.nanoTime() - start) / 1_000_000;
        assertTrue(ms < 1_000, "the wait ended after " + ms + " ms");
        return e;
    }
}
