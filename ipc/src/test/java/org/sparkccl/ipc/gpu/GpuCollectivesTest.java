package org.sparkccl.ipc.gpu;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.agrona.BufferUtil;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.sparkccl.core.CclException;
import org.sparkccl.core.DataType;
import org.sparkccl.core.PeerFailedException;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.check.ReferenceCheck;
import org.sparkccl.core.param.Params;
import org.sparkccl.ipc.cuda.DeviceBuffer;

/**
 * GPU collectives with ranks as threads of this JVM (same-process peers: plain device pointers with
 * peer access, or the host-staged path). Random inputs against float64 / exact references.
 */
@Tag("gpu")
class GpuCollectivesTest {
    private static final long[] COUNTS = {1, 7, 1023, 65537};
    private static final long BIG = 4L * 1024 * 1024 + 3;

    @Test
    void everyTypeAndOpOnTwoGpusP2pLl() throws Exception {
        everyTypeAndOp("0", "LL", "Ring");
    }

    @Test
    void everyTypeAndOpOnTwoGpusP2pSimple() throws Exception {
        everyTypeAndOp("0", "Simple", "Ring");
    }

    /**
     * The one-shot all-reduce, forced for every count of the matrix (the 4 Mi + 3 ones run as a ring),
     * launched per call (the other tests use the resident kernel for small one-shot calls).
     */
    @Test
    void everyTypeAndOpOnTwoGpusP2pOneShot() throws Exception {
        everyTypeAndOp("0", "LL", "OneShot");
    }

    @Test
    void everyTypeAndOpOnTwoGpusStagedLl() throws Exception {
        everyTypeAndOp("1", "LL", "auto");
    }

    @Test
    void everyTypeAndOpOnTwoGpusStagedSimple() throws Exception {
        everyTypeAndOp("1", "Simple", "auto");
    }

    private void everyTypeAndOp(String p2pDisable, String proto, String algo) throws Exception {
        GpuTestSupport.assumeGpus(1);
        int gpus = GpuTestSupport.gpus();
        Params params = GpuTestSupport.params("SPARKCCL_P2P_DISABLE", p2pDisable, "SPARKCCL_PROTO", proto,
                "SPARKCCL_ALGO", algo, "SPARKCCL_ONESHOT_THRESHOLD", "1M", "SPARKCCL_RESIDENT",
                algo.equals("OneShot") ? "0" : "1");
        List<String> failures = Collections.synchronizedList(new ArrayList<>());
        GpuTestSupport.runRanks(2, gpus, params, comm -> {
            if (comm.rank() == 0) {
                System.out.println("P2P_DISABLE=" + p2pDisable + " PROTO=" + proto + " ALGO=" + algo + ": "
                        + comm.describeLinks() + "; 65537 float: " + comm.algorithmFor(65537, DataType.FLOAT32));
            }
            if (algo.equals("OneShot")) {
                assertEquals("1shot", comm.algorithmFor(65537, DataType.FLOAT64), "one-shot must carry the matrix");
            }
            int k = 0;
            for (DataType type : DataType.values()) {
                for (ReduceOp op : ReduceOp.values()) {
                    for (long count : COUNTS) {
                        record(failures, GpuTestSupport.allReduceAndCheck(comm, type, op, count, (k++ & 1) == 0,
                                ReferenceCheck.seed(1, type, op, count, proto)));
                    }
                }
            }
            record(failures, GpuTestSupport.allReduceAndCheck(comm, DataType.FLOAT32, ReduceOp.SUM, BIG, false, 11));
            record(failures, GpuTestSupport.allReduceAndCheck(comm, DataType.BFLOAT16, ReduceOp.AVG, BIG, true, 12));
            record(failures, GpuTestSupport.allReduceAndCheck(comm, DataType.INT8, ReduceOp.MAX, BIG, false, 13));
            record(failures, GpuTestSupport.allReduceAndCheck(comm, DataType.FLOAT64, ReduceOp.PROD, BIG, true, 14));
        });
        assertTrue(failures.isEmpty(), failures.size() + " wrong results:\n" + String.join("\n", failures));
    }

    static void record(List<String> failures, String failure) {
        if (failure != null) {
            System.out.println("WRONG: " + failure);
            failures.add(failure);
        }
    }

    @Test
    void fourAndEightRanksOnTwoGpus() throws Exception {
        GpuTestSupport.assumeGpus(1);
        int gpus = GpuTestSupport.gpus();
        for (int ranks : new int[] {4, 8}) {
            for (String p2pDisable : new String[] {"0", "1"}) {
                List<String> failures = Collections.synchronizedList(new ArrayList<>());
                Params params = GpuTestSupport.params("SPARKCCL_P2P_DISABLE", p2pDisable, "SPARKCCL_NCHANNELS", "4");
                GpuTestSupport.runRanks(ranks, gpus, params, comm -> {
                    for (long count : new long[] {7, 65537, 1024 * 1024 + 3}) {
                        record(failures, GpuTestSupport.allReduceAndCheck(comm, DataType.FLOAT32, ReduceOp.SUM, count,
                                false, ReferenceCheck.seed(2, count)));
                        record(failures, GpuTestSupport.allReduceAndCheck(comm, DataType.INT32, ReduceOp.MAX, count,
                                true, ReferenceCheck.seed(3, count)));
                        record(failures, GpuTestSupport.allReduceAndCheck(comm, DataType.FLOAT16, ReduceOp.AVG, count,
                                false, ReferenceCheck.seed(4, count)));
                    }
                    otherCollectives(comm, failures);
                });
                assertTrue(failures.isEmpty(), ranks + " ranks, P2P_DISABLE=" + p2pDisable + ": " + failures);
            }
        }
    }

    /**
     * One-shot calls back to back, and between ring calls, in a pattern every rank follows: the two
     * inbox parities and the flags must never let a rank take a stale or a future line for this call's.
     */
    @Test
    void oneShotCallsInterleavedWithRingCalls() throws Exception {
        GpuTestSupport.assumeGpus(1);
        int gpus = GpuTestSupport.gpus();
        for (int ranks : new int[] {2, 4}) {
            List<String> failures = Collections.synchronizedList(new ArrayList<>());
            GpuTestSupport.runRanks(ranks, gpus, GpuTestSupport.params("SPARKCCL_RESIDENT", "1"), comm -> {
                assertEquals("1shot", comm.algorithmFor(1023, DataType.FLOAT32));
                assertTrue(!comm.algorithmFor(1L << 20, DataType.FLOAT32).equals("1shot"), "4 MB runs as a ring");
                for (int i = 0; i < 240; i++) {
                    long count = i % 5 == 3 ? (1L << 20) + i : i % 7 == 0 ? 1 : 1023 + i;
                    record(failures, GpuTestSupport.allReduceAndCheck(comm, DataType.FLOAT32, ReduceOp.SUM, count,
                            (i & 1) == 0, ReferenceCheck.seed(5, i)));
                    if (i % 40 == 39) {
                        Thread.sleep(10); // longer than the resident kernel's idle time: it ends, and comes back
                    }
                }
                assertTrue(comm.residentLaunches() > 1, "the resident kernel should have ended and restarted: "
                        + comm.residentLaunches() + " launch(es)");
            });
            assertTrue(failures.isEmpty(), ranks + " ranks: " + failures);
        }
    }

    @Test
    void reduceScatterAllGatherBroadcastBarrierOnTwoGpus() throws Exception {
        GpuTestSupport.assumeGpus(1);
        int gpus = GpuTestSupport.gpus();
        for (String proto : new String[] {"LL", "Simple"}) {
            List<String> failures = Collections.synchronizedList(new ArrayList<>());
            GpuTestSupport.runRanks(2, gpus, GpuTestSupport.params("SPARKCCL_PROTO", proto),
                    comm -> otherCollectives(comm, failures));
            assertTrue(failures.isEmpty(), proto + ": " + failures);
        }
    }

    /** ReduceScatter, AllGather and Broadcast (every root) at a few sizes, then a barrier. */
    static void otherCollectives(GpuCommunicator comm, List<String> failures) {
        int n = comm.size();
        int r = comm.rank();
        for (long count : new long[] {1, 1023, 65537}) {
            DataType type = DataType.FLOAT32;
            long bytesAll = count * n * type.size();
            ByteBuffer host = ByteBuffer.allocateDirect((int) bytesAll);
            long h = BufferUtil.address(host);
            {
                DeviceBuffer big = GpuTestSupport.Buffers.of().a;
                DeviceBuffer small = GpuTestSupport.Buffers.of().b;
                ReferenceCheck rs = new ReferenceCheck(type, ReduceOp.SUM, n, ReferenceCheck.seed(5, count));
                rs.fillInput(r, h, 0, count * n);
                big.copyFromHost(0, h, bytesAll, comm.stream());
                small.fill((byte) 0x7f, comm.stream());
                comm.reduceScatter(big.address(), small.address(), count, type, ReduceOp.SUM);
                small.copyToHost(0, h, count * type.size(), comm.stream());
                ReferenceCheck.Result res = rs.checkReduced(h, r * count, count);
                if (res.wrong() != 0) {
                    failures.add("reduceScatter rank " + r + " count " + count + ": " + res);
                }

                ReferenceCheck ag = new ReferenceCheck(type, ReduceOp.SUM, n, ReferenceCheck.seed(6, count));
                ag.fillInput(r, h, 0, count);
                small.copyFromHost(0, h, count * type.size(), comm.stream());
                big.fill((byte) 0x7f, comm.stream());
                comm.allGather(small.address(), big.address(), count, type);
                big.copyToHost(0, h, bytesAll, comm.stream());
                for (int q = 0; q < n; q++) {
                    ReferenceCheck.Result g = ag.checkCopy(q, h + q * count * type.size(), 0, count);
                    if (g.wrong() != 0) {
                        failures.add("allGather rank " + r + " block " + q + " count " + count + ": " + g);
                    }
                }

                for (int root = 0; root < n; root++) {
                    ReferenceCheck bc = new ReferenceCheck(type, ReduceOp.SUM, n, ReferenceCheck.seed(7, count, root));
                    bc.fillInput(r, h, 0, count);
                    small.copyFromHost(0, h, count * type.size(), comm.stream());
                    comm.broadcast(small.address(), small.address(), count, type, root);
                    small.copyToHost(0, h, count * type.size(), comm.stream());
                    ReferenceCheck.Result b = bc.checkCopy(root, h, 0, count);
                    if (b.wrong() != 0) {
                        failures.add("broadcast root " + root + " rank " + r + " count " + count + ": " + b);
                    }
                }
                java.lang.ref.Reference.reachabilityFence(host);
            }
        }
        comm.barrier();
    }

    @Test
    void arraysGoThroughStagingBuffers() throws Exception {
        GpuTestSupport.assumeGpus(1);
        int gpus = GpuTestSupport.gpus();
        GpuTestSupport.runRanks(2, gpus, GpuTestSupport.params(), comm -> {
            float[] data = new float[1000];
            double[] want = new double[data.length];
            for (int i = 0; i < data.length; i++) {
                data[i] = (float) Math.sin(i + comm.rank());
                want[i] = Math.sin(i) + Math.sin(i + 1);
            }
            comm.allReduce(data, ReduceOp.SUM);
            for (int i = 0; i < data.length; i++) {
                assertEquals(want[i], data[i], 1e-5, "element " + i);
            }
            long[] longs = {1L << 40, -3, 7};
            comm.allReduce(longs, ReduceOp.MAX);
            assertArrayEquals(new long[] {1L << 40, -3, 7}, longs);
        });
    }

    @Test
    void ranksThatDisagreeFailInsteadOfHanging() throws Exception {
        GpuTestSupport.assumeGpus(1);
        int gpus = GpuTestSupport.gpus();
        for (String algo : new String[] {"Ring", "auto"}) {
            ranksThatDisagree(gpus, algo);
        }
    }

    /** With ALGO=auto both calls are small enough to run one-shot; the header still goes around the ring. */
    private static void ranksThatDisagree(int gpus, String algo) throws Exception {
        List<Throwable> errors = Collections.synchronizedList(new ArrayList<>());
        GpuTestSupport.runRanks(2, gpus, GpuTestSupport.params("SPARKCCL_PROTO", "LL", "SPARKCCL_ALGO", algo), comm -> {
            {
                DeviceBuffer b = GpuTestSupport.Buffers.of().a;
                long count = comm.rank() == 0 ? 7 : 8;
                CclException e = assertThrows(CclException.class,
                        () -> comm.allReduce(b.address(), b.address(), count, DataType.FLOAT32, ReduceOp.SUM));
                System.out.println("rank " + comm.rank() + " failed as it should: " + e.getMessage());
                errors.add(e);
                assertThrows(CclException.class, comm::barrier, "a failed communicator stays failed");
            }
        });
        assertEquals(2, errors.size());
        String all = errors.get(0).getMessage() + " | " + errors.get(1).getMessage();
        assertTrue(all.contains("count 7") && all.contains("count 8"), all);
        assertNotNull(errors.get(0));
    }

    /**
     * A killed task: rank 0 waits in a collective that rank 1 has not called yet; rank 0's killed flag ends
     * rank 0's call (its kernel is asked to stop and raises the abort words), and rank 1's late call
     * fails at once naming rank 0 and why (its abort record) instead of waiting for the (long) timeout.
     */
    @Test
    void aCancelledRankStopsItsKernelAndItsPeers() throws Exception {
        GpuTestSupport.assumeGpus(1);
        java.util.concurrent.atomic.AtomicBoolean killed = new java.util.concurrent.atomic.AtomicBoolean();
        java.util.concurrent.CountDownLatch rank0Failed = new java.util.concurrent.CountDownLatch(1);
        List<String> messages = Collections.synchronizedList(new ArrayList<>());
        GpuTestSupport.runRanks(2, GpuTestSupport.gpus(), GpuTestSupport.params("SPARKCCL_TIMEOUT_MS", "120000"),
                () -> killed.get() && Integer.valueOf(0).equals(GpuTestSupport.RANK.get()), comm -> {
                    DeviceBuffer b = GpuTestSupport.Buffers.of().a;
                    if (comm.rank() == 1) {
                        Thread.sleep(300);
                        killed.set(true);
                        assertTrue(rank0Failed.await(60, TimeUnit.SECONDS), "rank 0 did not stop after the kill");
                    }
                    CclException e = assertThrows(CclException.class,
                            () -> comm.allReduce(b.address(), b.address(), 1024, DataType.FLOAT32, ReduceOp.SUM));
                    messages.add(comm.rank() + ": " + e.getMessage());
                    if (comm.rank() == 0) {
                        rank0Failed.countDown();
                    }
                });
        String all = String.join(" | ", messages);
        assertTrue(all.contains("0: ") && all.contains("cancelled (task killed)"), all);
        // Rank 1 reads why from rank 0's abort record: rank 0 and its reason, not just "another rank".
        assertTrue(all.contains("1: rank 1: rank 0 aborted before this rank's next collective: rank 0 on "), all);
    }

    /**
     * A rank that fails between collectives (in Spark: its task killed; SparkCcl's failure listener calls
     * {@code abort}): its peer, waiting for it in a blocking call and then in stream-ordered calls, fails
     * within about 50 ms of the abort naming it and the reason (its abort record), not at the timeout.
     */
    @Test
    void aRankAbortedBetweenCollectivesIsNamedByItsPeer() throws Exception {
        GpuTestSupport.assumeGpus(1);
        String reason = "its Spark task was killed (the test kills rank 0) between collectives";
        long abortAfterMs = 500;
        for (boolean streamOrdered : new boolean[] {false, true}) {
            List<String> seen = Collections.synchronizedList(new ArrayList<>());
            GpuTestSupport.runRanks(2, GpuTestSupport.gpus(), GpuTestSupport.params("SPARKCCL_TIMEOUT_MS", "120000"),
                    comm -> {
                        DeviceBuffer b = GpuTestSupport.Buffers.of().a;
                        long count = 65_537;
                        comm.allReduce(b.address(), b.address(), count, DataType.FLOAT32, ReduceOp.SUM);
                        if (comm.rank() == 0) {
                            Thread.sleep(abortAfterMs); // rank 1 waits in its next call meanwhile
                            comm.abort(reason);
                            return;
                        }
                        long start = System.nanoTime();
                        PeerFailedException e = assertThrows(PeerFailedException.class, () -> {
                            if (streamOrdered) {
                                comm.allReduce(b.address(), b.address(), count, DataType.FLOAT32, ReduceOp.SUM,
                                        comm.stream());
                                comm.synchronize(comm.stream());
                            } else {
                                comm.allReduce(b.address(), b.address(), count, DataType.FLOAT32, ReduceOp.SUM);
                            }
                        });
                        long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
                        seen.add((streamOrdered ? "stream-ordered" : "blocking") + ": rank 1 failed " + ms
                                + " ms after entering its call (rank 0 aborted after " + abortAfterMs + " ms) with: "
                                + e.getMessage());
                        assertEquals(0, e.failedRank(), e.getMessage());
                        assertTrue(e.getMessage().contains("rank 1: rank 0 aborted while this rank")
                                && e.getMessage().contains("rank 0: " + reason), e.getMessage());
                        assertTrue(ms < abortAfterMs + 1_500, "rank 1 failed " + ms + " ms after entering its call");
                    });
            seen.forEach(line -> System.out.println("MEASURED abort between collectives, " + line));
            assertEquals(1, seen.size(), "rank 1 did not fail as expected");
        }
    }

    /**
     * Two ranks of one process on one GPU, as TrainJob's resume ran them: rank 1 enters a broadcast at
     * once while rank 0 first allocates and frees CUDA memory. Before the shared-GPU launch gate, rank
     * 1's waiting kernel made rank 0's cuMemFree wait for it, and both waited until the timeout.
     */
    @Test
    void ranksSharingAGpuMayAllocateBetweenCollectives() throws Exception {
        GpuTestSupport.assumeGpus(1);
        List<String> failures = Collections.synchronizedList(new ArrayList<>());
        GpuTestSupport.runRanks(2, 1, GpuTestSupport.params("SPARKCCL_TIMEOUT_MS", "20000"), comm -> {
            DeviceBuffer b = GpuTestSupport.Buffers.of().a;
            for (int round = 0; round < 3; round++) {
                double[] value = {comm.rank() == 0 ? 0.25 + round : -1};
                if (comm.rank() == 0) {
                    Thread.sleep(300); // rank 1's kernel is waiting by now
                    try (org.sparkccl.ipc.cuda.PinnedHostBuffer pinned =
                                 org.sparkccl.ipc.cuda.PinnedHostBuffer.allocate(comm.device(), 1 << 20, "test");
                         DeviceBuffer scratch = DeviceBuffer.allocate(comm.device(), 1 << 20, "test")) {
                        scratch.fill((byte) 1, comm.stream());
                        pinned.address();
                    }
                }
                b.copyFromArray(value, 8, comm.stream());
                comm.broadcast(b.address(), b.address(), 1, DataType.FLOAT64, 0);
                b.copyToArray(value, 8, comm.stream());
                if (value[0] != 0.25 + round) {
                    failures.add("round " + round + " rank " + comm.rank() + " got " + value[0]);
                }
            }
        });
        assertEquals(List.of(), failures);
    }
}
