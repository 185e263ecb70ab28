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

    /**
     * The awaited peer closed: the first sighting only makes the caller look at its condition once
     * more (the peer may have met it and closed since the caller's last look, as a direct all-reduce's
     * last rank does); a wait that goes on ends at the next sighting, 50 ms later.
     */
    @Test
    void aClosedAwaitedPeerEndsOnlyAWaitThatGoesOn() {
        int[] checks = new int[1];
        FailureCheck rank1Closed = (peer, step, what) -> {
            checks[0]++;
            throw new PeerClosedException("rank 0: rank 1 closed its communicator while this rank waited for " + what);
        };
        WaitLoop wait = new WaitLoop(0, 20, 60_000, rank1Closed, () -> false);
        wait.startCollective("allReduce #1");
        while (checks[0] == 0) {
            wait.idle(1, 3, "the end of its direct all-reduce"); // the first sighting does not throw
        }
        wait.done(); // the condition was met after all

        long start = System.nanoTime();
        CclException e = waitUntilItThrows(wait);
        assertTrue(e instanceof PeerClosedException && e.getMessage().contains("rank 1 closed"), e.getMessage());
        assertEquals(3, checks[0], "a new wait needs two sightings again");
        assertTrue(System.nanoTime() - start >= 50_000_000L, "the second sighting comes a failure check later");
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
