package org.sparkccl.core.net;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.DataOutputStream;
import java.net.Socket;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.sparkccl.core.CclException;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.log.CclLog;
import org.sparkccl.core.param.Params;

/** Mismatched calls, a rank that leaves, and connections without the communicator's secret. */
class SocketFailureTest {

    @AfterEach
    void nothingLeaked() {
        SocketRanks.assertNothingLeaked();
    }

    /** Split: the steps of the larger calls go out in one piece per connection, sent in parallel. */
    @ParameterizedTest(name = "{0} ranks, {1} per host, {2} floats, split {3}")
    @CsvSource({"3, 1, 1000, -1", "4, 2, 1000, -1", "3, 1, 100000, 1"})
    void aMismatchFailsOnEveryRank(int n, int perHost, int count, int split) throws Exception {
        Map<Integer, String> errors = new ConcurrentHashMap<>();
        long start = System.nanoTime();
        SocketRanks.run(n, r -> "host" + (r / perHost), Map.of("SPARKCCL_SOCKET_SPLIT", String.valueOf(split)), comm -> {
            comm.allReduce(new float[count], ReduceOp.SUM); // a good call first
            float[] data = new float[comm.rank() == 1 ? count + 1 : count];
            CclException e = assertThrows(CclException.class, () -> comm.allReduce(data, ReduceOp.SUM));
            errors.put(comm.rank(), e.getMessage());
        });
        assertEquals(n, errors.size(), "every rank fails: " + errors);
        assertTrue(errors.values().stream().anyMatch(m -> m.contains("mismatch") && m.contains(String.valueOf(count + 1))),
                errors.toString());
        assertTrue(TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - start) < 10, "took too long");
    }

    @ParameterizedTest(name = "split {0}")
    @CsvSource({"-1", "1"})
    void aRankThatLeavesIsNamedAtOnce(int split) throws Exception {
        Map<Integer, String> errors = new ConcurrentHashMap<>();
        long start = System.nanoTime();
        SocketRanks.run(3, r -> "host" + r, Map.of("SPARKCCL_SOCKET_SPLIT", String.valueOf(split)), comm -> {
            float[] data = new float[100_000];
            comm.allReduce(data, ReduceOp.SUM);
            if (comm.rank() != 2) {
                errors.put(comm.rank(), assertThrows(CclException.class, () -> comm.allReduce(data, ReduceOp.SUM)).getMessage());
            }
        });
        assertEquals(2, errors.size(), errors.toString());
        assertTrue(errors.get(0).contains("rank 2"), errors.get(0));
        assertTrue(errors.values().stream().anyMatch(m -> m.contains("closed its communicator")), errors.toString());
        assertTrue(TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - start) < 10, "took too long");
    }

    /**
     * Spark's task-failure listener calls abort(reason) on a rank killed between collectives; 1000
     * floats go by recursive doubling over direct connections, 50 000 round the ring.
     */
    @ParameterizedTest(name = "{0} ranks, {1} per host, {2} floats")
    @CsvSource({"3, 1, 50000", "4, 2, 50000", "2, 1, 1000", "3, 1, 1000", "4, 1, 1000", "4, 2, 1000"})
    void aRankAbortedBetweenCollectivesIsNamedWithItsReason(int n, int perHost, int count) throws Exception {
        Map<Integer, String> errors = new ConcurrentHashMap<>();
        long start = System.nanoTime();
        SocketRanks.run(n, r -> "host" + (r / perHost), Map.of(), comm -> {
            float[] data = new float[count];
            comm.allReduce(data, ReduceOp.SUM);
            if (comm.rank() == 1) {
                comm.abort("task 7 was killed by Spark (test)");
            } else {
                errors.put(comm.rank(), assertThrows(CclException.class, () -> comm.allReduce(data, ReduceOp.SUM)).getMessage());
            }
        });
        assertEquals(n - 1, errors.size(), errors.toString());
        assertTrue(errors.values().stream().allMatch(m -> m.contains("rank 1")), errors.toString());
        assertTrue(errors.values().stream().anyMatch(m -> m.contains("killed by Spark (test)")), errors.toString());
        assertTrue(TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - start) < 10, "took too long");
    }

    /**
     * Small all-reduces go by recursive doubling over direct connections, larger ones round the ring:
     * ranks whose calls differ in size so far that they take different paths still all fail at once.
     */
    @ParameterizedTest(name = "{0} ranks, {1} per host, rank 1 sends {2} floats, the others {3}")
    @CsvSource({"2, 1, 100000, 1000", "2, 1, 1000, 100000", "3, 1, 100000, 1000", "4, 1, 1000, 100000",
            "4, 1, 100000, 1000", "5, 1, 1000, 100000"})
    void ranksOnDifferentPathsFailAtOnce(int n, int perHost, int rank1Count, int othersCount) throws Exception {
        Map<Integer, String> errors = new ConcurrentHashMap<>();
        long start = System.nanoTime();
        SocketRanks.run(n, r -> "host" + (r / perHost), Map.of(), comm -> {
            comm.allReduce(new float[othersCount], ReduceOp.SUM); // good calls first, one of each path
            comm.allReduce(new float[rank1Count], ReduceOp.SUM);
            float[] data = new float[comm.rank() == 1 ? rank1Count : othersCount];
            CclException e = assertThrows(CclException.class, () -> comm.allReduce(data, ReduceOp.SUM));
            errors.put(comm.rank(), e.getMessage());
        });
        assertEquals(n, errors.size(), "every rank fails: " + errors);
        assertTrue(errors.values().stream().anyMatch(m -> m.contains("mismatch")), errors.toString());
        assertTrue(TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - start) < 10, "took too long");
    }

    @ParameterizedTest(name = "{0} ranks")
    @CsvSource({"2", "3", "4"})
    void aRankThatLeavesASmallCallIsNamedAtOnce(int n) throws Exception {
        Map<Integer, String> errors = new ConcurrentHashMap<>();
        long start = System.nanoTime();
        SocketRanks.run(n, r -> "host" + r, Map.of(), comm -> {
            float[] data = new float[1000];
            comm.allReduce(data, ReduceOp.SUM);
            if (comm.rank() != n - 1) {
                errors.put(comm.rank(), assertThrows(CclException.class, () -> comm.allReduce(data, ReduceOp.SUM)).getMessage());
            }
        });
        assertEquals(n - 1, errors.size(), errors.toString());
        assertTrue(errors.values().stream().anyMatch(m -> m.contains("rank " + (n - 1)) && m.contains("closed its communicator")),
                errors.toString());
        assertTrue(TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - start) < 10, "took too long");
    }

    @Test
    void aConnectionWithoutTheSecretIsRefusedNamingWhy() throws Exception {
        Params params = SocketRanks.params("h", Map.of());
        try (SocketListener listener = SocketListener.open(0, params, new CclLog(0, params))) {
            byte[][] shares = {SocketListener.newSecretShare(), SocketListener.newSecretShare()};
            listener.start(shares);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            byte[] wrong = SocketHandshake.communicatorSecret(new byte[][] {SocketListener.newSecretShare()});
            CclException refused = assertThrows(CclException.class,
                    () -> SocketListener.connect(listener.address(), wrong, 0, 1, 0, 0, deadline));
            assertTrue(refused.getMessage().contains("wrong secret"), refused.getMessage());

            try (Socket stranger = new Socket(listener.address().getAddress(), listener.address().getPort())) {
                new DataOutputStream(stranger.getOutputStream()).writeBytes("GET / HTTP/1.0\r\n\r\n");
                assertTrue(stranger.getInputStream().readAllBytes().length > 0, "the stranger is told why");
            }
            // The real rank still gets in, and the listener hands its connection over.
            try (java.nio.channels.SocketChannel ok = SocketListener.connect(listener.address(), listener.secret(), 0, 1,
                    0, 0, deadline);
                 java.nio.channels.SocketChannel taken = listener.take(0, 1, 0, deadline, () -> false)) {
                assertTrue(ok.isConnected() && taken.isConnected());
            }
            assertEquals(2, listener.refusals().size(), listener.refusals().toString());
            assertTrue(listener.refusals().get(1).contains("not a sparkccl"), listener.refusals().toString());
        }
    }
}
