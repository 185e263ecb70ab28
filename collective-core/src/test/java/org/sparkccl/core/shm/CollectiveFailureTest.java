package org.sparkccl.core.shm;

import org.sparkccl.core.CclException;
import org.sparkccl.core.CclTimeoutException;
import org.sparkccl.core.PeerFailedException;
import org.sparkccl.core.ReduceOp;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.junit.jupiter.api.Test;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.transport.LocalMemoryTransport;

/** Ranks that disagree, or stop, make every rank fail with a message instead of hanging. */
class CollectiveFailureTest {
    private static final Params FAST_TIMEOUT = Params.defaults().withOverrides(Map.of("SPARKCCL_TIMEOUT_MS", "3000"));

    @Test
    void countMismatchFailsOnEveryRankNamingBothCalls() throws Exception {
        Map<Integer, String> errors = new ConcurrentHashMap<>();
        ThreadRanks.run(4, FAST_TIMEOUT, comm -> {
            float[] data = new float[comm.rank() == 2 ? 200 : 100];
            java.util.Arrays.fill(data, 1.5f);
            CclException e = assertThrows(CclException.class, () -> comm.allReduce(data, ReduceOp.SUM));
            errors.put(comm.rank(), e.getMessage());
            // Later calls fail at once: the communicator is unusable after a failure.
            assertThrows(CclException.class, comm::barrier);
        });
        assertEquals(4, errors.size());
        assertTrue(errors.get(3).contains("collective mismatch") && errors.get(3).contains("count 100")
                && errors.get(3).contains("count 200"), errors.get(3));
        for (String message : errors.values()) {
            assertTrue(message.contains("count 200") || message.contains("aborted"), message);
        }
        assertEquals(0, LocalMemoryTransport.outstandingBytesInJvm());
    }

    @Test
    void typeMismatchFailsEveryRank() throws Exception {
        Map<Integer, String> errors = new ConcurrentHashMap<>();
        ThreadRanks.run(3, FAST_TIMEOUT, comm -> {
            CclException e = assertThrows(CclException.class, () -> {
                if (comm.rank() == 0) {
                    comm.allReduce(new double[8], ReduceOp.SUM);
                } else {
                    comm.allReduce(new long[8], ReduceOp.SUM);
                }
            });
            errors.put(comm.rank(), e.getMessage());
        });
        assertEquals(3, errors.size());
        assertTrue(errors.get(1).contains("double") && errors.get(1).contains("int64"), errors.get(1));
    }

    @Test
    void aRankThatSkipsACollectiveMakesTheOthersTimeOutNamingIt() throws Exception {
        Map<Integer, Throwable> errors = new ConcurrentHashMap<>();
        ThreadRanks.run(3, FAST_TIMEOUT, comm -> {
            if (comm.rank() != 1) {
                errors.put(comm.rank(), assertThrows(CclException.class, () -> comm.allReduce(new int[5], ReduceOp.MAX)));
            } else {
                Thread.sleep(4500); // stays in the communicator without calling, then closes
            }
        });
        assertTrue(errors.get(2) instanceof CclTimeoutException || errors.get(2).getMessage().contains("aborted"),
                String.valueOf(errors.get(2)));
        assertTrue(errors.get(2).getMessage().contains("rank 1") || errors.get(2).getMessage().contains("rank 0"),
                errors.get(2).getMessage());
    }

    /**
     * A rank that fails between collectives (Spark: its task fails or is killed outside them) and
     * says so with abort: every peer waiting in the collective fails at once naming it and the reason,
     * long before the timeout.
     */
    @Test
    void aRankThatAbortsBetweenCollectivesMakesTheWaitingOthersFailNamingIt() throws Exception {
        Params longTimeout = Params.defaults().withOverrides(Map.of("SPARKCCL_TIMEOUT_MS", "60000"));
        Map<Integer, PeerFailedException> errors = new ConcurrentHashMap<>();
        long start = System.nanoTime();
        ThreadRanks.run(3, longTimeout, comm -> {
            if (comm.rank() == 1) {
                Thread.sleep(300); // the others are waiting in the all-reduce by now
                comm.abort("its task failed between collectives");
                comm.abort("a second abort changes nothing");
            } else {
                errors.put(comm.rank(), assertThrows(PeerFailedException.class,
                        () -> comm.allReduce(new float[1000], ReduceOp.SUM)));
            }
        });
        long ms = (System.nanoTime() - start) / 1_000_000;
        assertEquals(2, errors.size());
        for (PeerFailedException e : errors.values()) {
            assertEquals(1, e.failedRank(), e.getMessage());
            assertTrue(e.getMessage().contains("rank 1: its task failed between collectives"), e.getMessage());
        }
        assertTrue(ms < 5_000, "the ranks ended after " + ms + " ms");
        assertEquals(0, LocalMemoryTransport.outstandingBytesInJvm());
    }

    /**
     * Rank 2 aborts between collectives, then rank 1 does (as Spark kills the rest of a barrier stage
     * after one task failed): rank 1's abort names rank 2 as the cause, so rank 0, which finds rank 1's
     * abort first, still names rank 2.
     */
    @Test
    void anAbortAfterAPeerFailedNamesThatPeer() throws Exception {
        Map<Integer, PeerFailedException> errors = new ConcurrentHashMap<>();
        ThreadRanks.run(3, FAST_TIMEOUT, comm -> {
            if (comm.rank() == 2) {
                comm.abort("its task failed between collectives");
            } else if (comm.rank() == 1) {
                Thread.sleep(300);
                comm.abort("its task was killed because another task of the stage failed");
            } else {
                Thread.sleep(600);
                errors.put(0, assertThrows(PeerFailedException.class, () -> comm.allReduce(new float[10], ReduceOp.SUM)));
            }
        });
        PeerFailedException e = errors.get(0);
        assertEquals(2, e.failedRank(), e.getMessage());
        assertTrue(e.getMessage().contains("rank 1: its task was killed because another task of the stage failed;"
                + " before that: rank 1: rank 2 aborted") && e.getMessage().contains("rank 2: its task failed"),
                e.getMessage());
    }
}
