package org.sparkccl.ipc.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.SplittableRandom;
import org.agrona.BufferUtil;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.sparkccl.core.CclException;
import org.sparkccl.core.DataType;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.check.ReferenceCheck;
import org.sparkccl.core.param.Params;
import org.sparkccl.ipc.cuda.CudaGraph;
import org.sparkccl.ipc.cuda.CudaStream;
import org.sparkccl.ipc.cuda.DeviceBuffer;

/**
 * Stream-ordered collectives (queued on the caller's stream, the call returns at once), back to back
 * and replayed from CUDA graphs, with ranks as threads of this JVM; random inputs against float64 /
 * exact references.
 */
@Tag("gpu")
class GpuStreamOrderedTest {
    private static final long[] COUNTS = {1, 7, 1023, 65537, (1L << 20) + 3};

    /** The settings of every test here, with {@code keyValues} on top (the subclasses add their own). */
    Params params(String... keyValues) {
        return GpuTestSupport.params(keyValues);
    }

    /** A subclass's settings: {@code fixed} (key, value, ...), then a test's own {@code keyValues} on top. */
    static Params paramsWith(String[] fixed, String... keyValues) {
        String[] all = Arrays.copyOf(fixed, fixed.length + keyValues.length);
        System.arraycopy(keyValues, 0, all, fixed.length, keyValues.length);
        return GpuTestSupport.params(all);
    }

    @Test
    void everyTypeAndOpStreamOrdered() throws Exception {
        GpuTestSupport.assumeGpus(1);
        List<String> failures = Collections.synchronizedList(new ArrayList<>());
        GpuTestSupport.runRanks(2, GpuTestSupport.gpus(), params(), comm -> {
            try (CudaStream user = new CudaStream(comm.device(), "test stream")) {
                int k = 0;
                for (DataType type : DataType.values()) {
                    for (ReduceOp op : ReduceOp.values()) {
                        for (long count : COUNTS) {
                            boolean inPlace = (k++ & 1) == 0;
                            record(failures, streamOrderedAllReduce(comm, user, type, op, count, inPlace,
                                    ReferenceCheck.seed(21, type, op, count), 0));
                        }
                    }
                }
            }
        });
        assertNoFailures(failures);
    }

    /**
     * 180 calls queued before one synchronize: three in-place float64 sums over regions of different
     * sizes (one-shot, and rings of both protocols), interleaved. Each call doubles the previous one's
     * result on 2 ranks, so the final values, (a + b) * 2^59, are exact only if every call ran, in order,
     * on the previous call's output.
     */
    @Test
    void manyBackToBackCallsBeforeOneSync() throws Exception {
        GpuTestSupport.assumeGpus(1);
        long[] counts = {3, 40_001, (1L << 20) + 1};
        int rounds = 60;
        List<String> failures = Collections.synchronizedList(new ArrayList<>());
        GpuTestSupport.runRanks(2, GpuTestSupport.gpus(), params(), comm -> {
            DeviceBuffer buf = GpuTestSupport.Buffers.of().a;
            long[] offsets = {0, 64, 64 + 8 * 40_064};
            long total = offsets[2] + 8 * counts[2];
            ByteBuffer host = ByteBuffer.allocateDirect((int) total).order(ByteOrder.nativeOrder()); // as the GPU reads
            long h = BufferUtil.address(host);
            double[][] inputs = new double[2][];
            for (int r = 0; r < 2; r++) {
                inputs[r] = randomDoubles(r, (int) (total / 8));
            }
            for (int i = 0; i < total / 8; i++) {
                host.putDouble(i * 8, inputs[comm.rank()][i]);
            }
            try (CudaStream user = new CudaStream(comm.device(), "test stream")) {
                buf.copyFromHost(0, h, total, user);
                for (int round = 0; round < rounds; round++) {
                    for (int j = 0; j < counts.length; j++) {
                        long at = buf.address() + offsets[j];
                        comm.allReduce(at, at, counts[j], DataType.FLOAT64, ReduceOp.SUM, user);
                    }
                }
                comm.synchronize(user);
                buf.copyToHost(0, h, total, user);
            }
            for (int j = 0; j < counts.length; j++) {
                long wrong = 0;
                String first = null;
                for (long e = 0; e < counts[j]; e++) {
                    int i = (int) (offsets[j] / 8 + e);
                    double want = Math.scalb(inputs[0][i] + inputs[1][i], rounds - 1);
                    double got = host.getDouble(i * 8);
                    if (Double.doubleToLongBits(got) != Double.doubleToLongBits(want)) {
                        wrong++;
                        first = first != null ? first : "element " + e + ": " + got + " instead of " + want;
                    }
                }
                if (wrong > 0) {
                    failures.add("rank " + comm.rank() + " count " + counts[j] + ": " + wrong + " wrong, " + first);
                }
            }
        });
        assertEquals(List.of(), failures);
    }

    /**
     * A graph of four stream-ordered all-reduces (three one-shot ones, so the one-shot inbox parity of each
     * replay differs from the one before, and a ring) replayed 20 times with new inputs before each replay,
     * and stream-ordered and blocking calls between replays: the kernels' own call counters must carry
     * the sequence numbers and parities across all of them.
     */
    @Test
    void graphCaptureAndTwentyReplays() throws Exception {
        GpuTestSupport.assumeGpus(1);
        List<String> failures = Collections.synchronizedList(new ArrayList<>());
        // Instantiating a graph may wait for the GPU, so for a peer's kernel: no rank replays before both have one.
        java.util.concurrent.CyclicBarrier instantiated = new java.util.concurrent.CyclicBarrier(2);
        GpuTestSupport.runRanks(2, GpuTestSupport.gpus(), params(), comm -> {
            DeviceBuffer a = GpuTestSupport.Buffers.of().a;
            DeviceBuffer b = GpuTestSupport.Buffers.of().b;
            Call[] calls = {
                new Call(DataType.FLOAT32, ReduceOp.SUM, 1023, a, 0, b, 0),
                new Call(DataType.FLOAT32, ReduceOp.SUM, (1L << 20) + 3, a, 8192, b, 8192),
                new Call(DataType.INT32, ReduceOp.MAX, 7, a, 8L << 20, a, 8L << 20),
                new Call(DataType.BFLOAT16, ReduceOp.AVG, 65537, a, 9L << 20, b, 9L << 20),
            };
            assertEquals("1shot", comm.algorithmFor(1023, DataType.FLOAT32));
            assertTrue(!comm.algorithmFor((1L << 20) + 3, DataType.FLOAT32).equals("1shot"), "4 MB runs as a ring");
            try (CudaStream user = new CudaStream(comm.device(), "test stream");
                 CudaGraph graph = CudaGraph.capture(user, () -> {
                     for (Call c : calls) {
                         comm.allReduce(c.send(), c.recv(), c.count, c.type, c.op, user);
                     }
                 }, "rank " + comm.rank())) {
                instantiated.await();
                for (int replay = 0; replay < 20; replay++) {
                    List<ReferenceCheck> checks = new ArrayList<>();
                    for (Call c : calls) {
                        checks.add(c.fill(comm, user, ReferenceCheck.seed(22, replay, c.count)));
                    }
                    graph.launch(user);
                    comm.synchronize(user);
                    for (int i = 0; i < calls.length; i++) {
                        record(failures, calls[i].check(comm, user, checks.get(i), "replay " + replay));
                    }
                    // Every one-shot block keeps its own copy of the one-shot count; between kernels all copies
                    // agree (one-shot calls of one block and of many here), or a rank could reuse an inbox too early.
                    int[] counts = comm.oneShotCallCounts();
                    if (Arrays.stream(counts).distinct().count() != 1 || counts[0] == 0) {
                        failures.add("rank " + comm.rank() + " replay " + replay + ": one-shot blocks' call counts differ: "
                                + Arrays.toString(counts));
                    }
                    // Calls between replays advance the kernels' counters (the graph's arguments stay as captured).
                    if (replay % 3 == 1) {
                        record(failures, GpuTestSupport.allReduceAndCheck(comm, DataType.FLOAT32, ReduceOp.SUM, 513,
                                false, ReferenceCheck.seed(23, replay)));
                    } else if (replay % 3 == 2) {
                        record(failures, streamOrderedAllReduce(comm, user, DataType.FLOAT64, ReduceOp.MIN, 4099, true,
                                ReferenceCheck.seed(24, replay), 10L << 20));
                    }
                }
            }
        });
        assertNoFailures(failures);
    }

    /**
     * ReduceScatter, AllGather and Broadcast (every root), stream-ordered, queued together before one
     * synchronize. Every input is copied up before the first call is queued: a copy from pageable host
     * memory queued behind a collective that waits for a peer sharing this GPU stalled that peer's
     * launches in the first version of this test (the collective timed out).
     */
    @Test
    void otherCollectivesStreamOrdered() throws Exception {
        GpuTestSupport.assumeGpus(1);
        List<String> failures = Collections.synchronizedList(new ArrayList<>());
        GpuTestSupport.runRanks(2, GpuTestSupport.gpus(), params(), comm -> {
            int n = comm.size();
            int r = comm.rank();
            DataType type = DataType.FLOAT32;
            DeviceBuffer a = GpuTestSupport.Buffers.of().a;
            DeviceBuffer b = GpuTestSupport.Buffers.of().b;
            for (long count : new long[] {1, 1023, 65537}) {
                long blockBytes = count * type.size();
                ByteBuffer host = ByteBuffer.allocateDirect((int) (blockBytes * n));
                long h = BufferUtil.address(host);
                // At a: reduceScatter's n blocks, then allGather's block. At b: reduceScatter's output block,
                // allGather's n blocks, then one block per broadcast root (in place).
                ReferenceCheck rs = new ReferenceCheck(type, ReduceOp.SUM, n, ReferenceCheck.seed(26, count));
                ReferenceCheck ag = new ReferenceCheck(type, ReduceOp.SUM, n, ReferenceCheck.seed(27, count));
                ReferenceCheck[] bc = new ReferenceCheck[n];
                GpuTestSupport.poison(b, comm);
                rs.fillInput(r, h, 0, count * n);
                a.copyFromHost(0, h, blockBytes * n, comm.stream());
                ag.fillInput(r, h, 0, count);
                a.copyFromHost(blockBytes * n, h, blockBytes, comm.stream());
                for (int root = 0; root < n; root++) {
                    bc[root] = new ReferenceCheck(type, ReduceOp.SUM, n, ReferenceCheck.seed(28, count, root));
                    bc[root].fillInput(r, h, 0, count);
                    b.copyFromHost(blockBytes * (1 + n + root), h, blockBytes, comm.stream());
                }
                try (CudaStream user = new CudaStream(comm.device(), "test stream")) {
                    comm.reduceScatter(a.address(), b.address(), count, type, ReduceOp.SUM, user);
                    comm.allGather(a.address() + blockBytes * n, b.address() + blockBytes, count, type, user);
                    for (int root = 0; root < n; root++) {
                        long at = b.address() + blockBytes * (1 + n + root);
                        comm.broadcast(at, at, count, type, root, user);
                    }
                    comm.synchronize(user);
                }
                b.copyToHost(0, h, blockBytes, comm.stream());
                ReferenceCheck.Result res = rs.checkReduced(h, r * count, count);
                if (res.wrong() != 0) {
                    failures.add("reduceScatter rank " + r + " count " + count + ": " + res);
                }
                b.copyToHost(blockBytes, h, blockBytes * n, comm.stream());
                for (int q = 0; q < n; q++) {
                    ReferenceCheck.Result g = ag.checkCopy(q, h + q * blockBytes, 0, count);
                    if (g.wrong() != 0) {
                        failures.add("allGather rank " + r + " block " + q + " count " + count + ": " + g);
                    }
                }
                for (int root = 0; root < n; root++) {
                    b.copyToHost(blockBytes * (1 + n + root), h, blockBytes, comm.stream());
                    ReferenceCheck.Result c = bc[root].checkCopy(root, h, 0, count);
                    if (c.wrong() != 0) {
                        failures.add("broadcast root " + root + " rank " + r + " count " + count + ": " + c);
                    }
                }
                java.lang.ref.Reference.reachabilityFence(host);
            }
        });
        assertNoFailures(failures);
    }

    /** One rank queues a different count: both ranks fail, at synchronize, naming both calls. */
    @Test
    void aMismatchFailsOnBothRanks() throws Exception {
        GpuTestSupport.assumeGpus(1);
        List<String> messages = Collections.synchronizedList(new ArrayList<>());
        GpuTestSupport.runRanks(2, GpuTestSupport.gpus(), params("SPARKCCL_TIMEOUT_MS", "20000"), comm -> {
            DeviceBuffer b = GpuTestSupport.Buffers.of().a;
            try (CudaStream user = new CudaStream(comm.device(), "test stream")) {
                comm.allReduce(b.address(), b.address(), 100, DataType.FLOAT32, ReduceOp.SUM, user); // agreed
                long count = comm.rank() == 0 ? 7 : 8;
                comm.allReduce(b.address(), b.address(), count, DataType.FLOAT32, ReduceOp.SUM, user);
                CclException e = assertThrows(CclException.class, () -> comm.synchronize(user));
                messages.add(comm.rank() + ": " + e.getMessage());
                assertThrows(CclException.class, () -> comm.allReduce(b.address(), b.address(), 5, DataType.FLOAT32,
                        ReduceOp.SUM, user), "a failed communicator stays failed");
            }
        });
        assertEquals(2, messages.size(), messages.toString());
        String all = String.join(" | ", messages);
        System.out.println(all);
        // Each rank's error names the mismatch and both calls: the one that saw it first says so itself, the
        // other may have been stopped by that rank's abort first, whose record it quotes.
        for (String m : messages) {
            assertTrue(m.contains("collective mismatch") && m.contains("count 7") && m.contains("count 8"), all);
        }
    }

    /** Close right after queuing calls: it waits for them, then frees everything (runRanks checks that nothing leaked). */
    @Test
    void closeAfterStreamCallsLeavesNothing() throws Exception {
        GpuTestSupport.assumeGpus(1);
        GpuTestSupport.runRanks(2, GpuTestSupport.gpus(), params(), comm -> {
            DeviceBuffer b = GpuTestSupport.Buffers.of().a;
            try (CudaStream user = new CudaStream(comm.device(), "test stream")) {
                for (int i = 0; i < 20; i++) {
                    comm.allReduce(b.address(), b.address(), i % 2 == 0 ? 1000 : (1L << 20), DataType.FLOAT32,
                            ReduceOp.MAX, user);
                }
                comm.close();
                assertTrue(user.isIdle(), "close returned before the queued calls ended");
            }
        });
    }

    private static double[] randomDoubles(int rank, int n) {
        SplittableRandom random = new SplittableRandom(ReferenceCheck.seed(25, rank));
        double[] d = new double[n];
        for (int i = 0; i < n; i++) {
            d[i] = random.nextDouble(-1000, 1000);
        }
        return d;
    }

    /**
     * One checked stream-ordered all-reduce on the test buffers at {@code offset}: inputs up, the call,
     * synchronize, output down; the failure described, or null.
     */
    static String streamOrderedAllReduce(GpuCommunicator comm, CudaStream user, DataType type, ReduceOp op,
                                         long count, boolean inPlace, long seed, long offset) {
        GpuTestSupport.Buffers buffers = GpuTestSupport.Buffers.of();
        Call call = new Call(type, op, count, buffers.a, offset, inPlace ? buffers.a : buffers.b, offset);
        ReferenceCheck reference = call.fill(comm, user, seed);
        comm.allReduce(call.send(), call.recv(), count, type, op, user);
        comm.synchronize(user);
        return call.check(comm, user, reference, "stream-ordered" + (inPlace ? " in place" : ""));
    }

    static void assertNoFailures(List<String> failures) {
        assertTrue(failures.isEmpty(), failures.size() + " wrong results:\n" + String.join("\n", failures));
    }

    static void record(List<String> failures, String failure) {
        if (failure != null) {
            System.out.println("WRONG: " + failure);
            failures.add(failure);
        }
    }

    /** One all-reduce of a graph: its buffers, and how to fill and check them around a replay. */
    private static final class Call {
        final DataType type;
        final ReduceOp op;
        final long count;
        final DeviceBuffer sendBuffer;
        final long sendOffset;
        final DeviceBuffer recvBuffer;
        final long recvOffset;

        Call(DataType type, ReduceOp op, long count, DeviceBuffer sendBuffer, long sendOffset, DeviceBuffer recvBuffer,
             long recvOffset) {
            this.type = type;
            this.op = op;
            this.count = count;
            this.sendBuffer = sendBuffer;
            this.sendOffset = sendOffset;
            this.recvBuffer = recvBuffer;
            this.recvOffset = recvOffset;
        }

        long send() {
            return sendBuffer.address() + sendOffset;
        }

        long recv() {
            return recvBuffer.address() + recvOffset;
        }

        /** New inputs (and, out of place, a poisoned output) for the next replay. */
        ReferenceCheck fill(GpuCommunicator comm, CudaStream on, long seed) {
            ReferenceCheck check = new ReferenceCheck(type, op, comm.size(), seed);
            long bytes = count * type.size();
            ByteBuffer host = ByteBuffer.allocateDirect((int) bytes);
            long h = BufferUtil.address(host);
            if (send() != recv()) {
                for (int i = 0; i < bytes; i++) {
                    host.put(i, (byte) 0x7f);
                }
                recvBuffer.copyFromHost(recvOffset, h, bytes, on);
            }
            check.fillInput(comm.rank(), h, 0, count);
            sendBuffer.copyFromHost(sendOffset, h, bytes, on);
            java.lang.ref.Reference.reachabilityFence(host);
            return check;
        }

        String check(GpuCommunicator comm, CudaStream on, ReferenceCheck check, String when) {
            long bytes = count * type.size();
            ByteBuffer host = ByteBuffer.allocateDirect((int) bytes);
            long h = BufferUtil.address(host);
            recvBuffer.copyToHost(recvOffset, h, bytes, on);
            ReferenceCheck.Result result = check.checkReduced(h, 0, count);
            java.lang.ref.Reference.reachabilityFence(host);
            return result.wrong() == 0 ? null : "rank " + comm.rank() + " " + when + " " + type.ncclName() + " "
                    + op.ncclName() + " count " + count + ": " + result;
        }
    }
}
