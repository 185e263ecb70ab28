package org.sparkccl.ipc.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.function.IntFunction;
import org.agrona.BufferUtil;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.sparkccl.core.CclException;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.DataType;
import org.sparkccl.core.memory.HostStagingBuffer;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.bootstrap.ThreadGroupBootstrap;
import org.sparkccl.core.check.ReferenceCheck;
import org.sparkccl.core.engine.Engines;
import org.sparkccl.core.net.SocketCommunicator;
import org.sparkccl.core.param.Params;
import org.sparkccl.ipc.cuda.CudaStream;
import org.sparkccl.ipc.cuda.DeviceBuffer;

/**
 * GPU ranks on pretend hosts (SPARKCCL_HOST_ID per rank; ranks as threads of this JVM, sockets on
 * 127.0.0.1), built through {@link Engines}: every type and op against the float64 reference on
 * random data at odd counts, sizes that take several pieces of the pinned hop, the other collectives,
 * one-rank-per-host and uneven layouts, and ranks that disagree failing on every rank.
 */
@Tag("gpu")
class GpuTwoLevelTest {
    private static final long[] COUNTS = {1, 7, 1023, 65537};
    /** Two pieces of the TCP hop per shard (8 MB pieces) on two ranks per host, odd. */
    private static final long BIG = 4L * 1024 * 1024 + 3;

    @FunctionalInterface
    interface Body {
        void run(GpuTwoLevelCommunicator comm, DeviceBuffer a, DeviceBuffer b) throws Exception;
    }

    /** {@code n} ranks as threads, rank r on pretend host {@code hostOf(r)}, each on GPU r mod gpus. */
    private static void runRanks(int n, IntFunction<String> hostOf, Body body) throws Exception {
        int gpus = GpuTestSupport.gpus();
        new ThreadGroupBootstrap.Group(n, Duration.ofSeconds(120)).run(bootstrap -> {
            int rank = bootstrap.rank();
            Params params = GpuTestSupport.params("SPARKCCL_SOCKET_ADDRESS", "127.0.0.1", "SPARKCCL_NCHANNELS", "8")
                    .withOverrides(Map.of("SPARKCCL_HOST_ID", hostOf.apply(rank)));
            try (Communicator built = Engines.gpu(bootstrap, rank % gpus, params, () -> false)) {
                GpuTwoLevelCommunicator comm = (GpuTwoLevelCommunicator) built;
                if (rank == 0) {
                    System.out.println(n + " ranks: " + comm.describeLinks());
                }
                DeviceBuffer a = DeviceBuffer.allocate(comm.device(), GpuTestSupport.MAX_BYTES, "test");
                DeviceBuffer b = DeviceBuffer.allocate(comm.device(), GpuTestSupport.MAX_BYTES, "test");
                // No rank allocates or frees device memory while a peer's kernel may wait for it.
                bootstrap.barrier();
                try {
                    body.run(comm, a, b);
                } finally {
                    bootstrap.barrier();
                    a.close();
                    b.close();
                }
            }
            return null;
        }, Duration.ofMinutes(5));
        GpuTestSupport.assertNothingLeaked();
        assertEquals(0, SocketCommunicator.outstandingBytesInJvm(), "socket FIFOs left");
        assertEquals(0, HostStagingBuffer.outstandingBytes(), "host staging left");
    }

    @Test
    void everyTypeAndOpOnTwoHostsOfTwo() throws Exception {
        GpuTestSupport.assumeGpus(1);
        List<String> failures = Collections.synchronizedList(new ArrayList<>());
        runRanks(4, r -> "host" + r / 2, (comm, a, b) -> {
            int k = 0;
            for (DataType type : DataType.values()) {
                for (ReduceOp op : ReduceOp.values()) {
                    for (long count : COUNTS) {
                        record(failures, allReduce(comm, a, b, type, op, count, (k++ & 1) == 0,
                                ReferenceCheck.seed(21, type, op, count)));
                    }
                }
            }
            record(failures, allReduce(comm, a, b, DataType.FLOAT32, ReduceOp.SUM, BIG, false, 22));
            record(failures, allReduce(comm, a, b, DataType.BFLOAT16, ReduceOp.AVG, BIG, true, 23));
            record(failures, allReduce(comm, a, b, DataType.INT8, ReduceOp.MAX, BIG, false, 24));
            record(failures, allReduce(comm, a, b, DataType.FLOAT64, ReduceOp.PROD, BIG, true, 25));
            otherCollectives(comm, a, b, failures, new long[] {1, 1023, 65537, 600_001});
        });
        assertTrue(failures.isEmpty(), failures.size() + " wrong results:\n" + String.join("\n", failures));
    }

    /** One GPU rank per host (the GPU level is a copy) and hosts of 2 and 1 ranks (one ring over every rank). */
    @Test
    void oneRankPerHostAndUnevenHosts() throws Exception {
        GpuTestSupport.assumeGpus(1);
        for (int n : new int[] {2, 3}) {
            List<String> failures = Collections.synchronizedList(new ArrayList<>());
            runRanks(n, r -> n == 2 ? "host" + r : "host" + Math.min(r, 1), (comm, a, b) -> {
                for (long count : new long[] {7, 65537, BIG}) {
                    record(failures, allReduce(comm, a, b, DataType.FLOAT32, ReduceOp.SUM, count, false,
                            ReferenceCheck.seed(26, n, count)));
                    record(failures, allReduce(comm, a, b, DataType.INT32, ReduceOp.MIN, count, true,
                            ReferenceCheck.seed(27, n, count)));
                    record(failures, allReduce(comm, a, b, DataType.FLOAT16, ReduceOp.AVG, count, false,
                            ReferenceCheck.seed(28, n, count)));
                }
                otherCollectives(comm, a, b, failures, new long[] {1, 65537});
            });
            assertTrue(failures.isEmpty(), n + " ranks: " + failures);
        }
    }

    /**
     * Rank 3 all-reduces 1001 elements where the others all-reduce 1000: on two ranks per host both make
     * shards of 500, so only the header checks can tell. Every rank fails (none waits for the timeout),
     * and the communicator stays failed.
     */
    @Test
    void ranksThatDisagreeFailOnEveryRank() throws Exception {
        GpuTestSupport.assumeGpus(1);
        List<String> errors = Collections.synchronizedList(new ArrayList<>());
        runRanks(4, r -> "host" + r / 2, (comm, a, b) -> {
            long count = comm.rank() == 3 ? 1001 : 1000;
            long start = System.nanoTime();
            CclException e = assertThrows(CclException.class,
                    () -> comm.allReduce(a.address(), a.address(), count, DataType.FLOAT32, ReduceOp.SUM));
            long ms = (System.nanoTime() - start) / 1_000_000;
            System.out.println("rank " + comm.rank() + " failed as it should, after " + ms + " ms: " + e.getMessage());
            errors.add(e.getMessage());
            assertTrue(ms < 10_000, "rank " + comm.rank() + " failed after " + ms + " ms: it waited for a timeout");
            assertThrows(CclException.class, comm::barrier, "a failed communicator stays failed");
        });
        assertEquals(4, errors.size(), "every rank fails: " + errors);
        assertTrue(errors.stream().anyMatch(m -> m.contains("mismatch") && m.contains("count 1001")),
                "some rank names the mismatch: " + errors);
    }

    static void record(List<String> failures, String failure) {
        if (failure != null) {
            System.out.println("WRONG: " + failure);
            failures.add(failure);
        }
    }

    /** One all-reduce on device buffers (the receive buffer poisoned first), checked; null when right. */
    private static String allReduce(GpuTwoLevelCommunicator comm, DeviceBuffer a, DeviceBuffer b, DataType type,
                                    ReduceOp op, long count, boolean inPlace, long seed) {
        ReferenceCheck check = new ReferenceCheck(type, op, comm.size(), seed);
        CudaStream stream = comm.stream();
        ByteBuffer host = ByteBuffer.allocateDirect((int) (count * type.size()));
        long h = BufferUtil.address(host);
        DeviceBuffer out = inPlace ? a : b;
        check.fillInput(comm.rank(), h, 0, count);
        a.copyFromHost(0, h, count * type.size(), stream);
        if (!inPlace) {
            out.fill((byte) 0x7f, stream);
        }
        comm.allReduce(a.address(), out.address(), count, type, op);
        out.copyToHost(0, h, count * type.size(), stream);
        ReferenceCheck.Result result = check.checkReduced(h, 0, count);
        java.lang.ref.Reference.reachabilityFence(host);
        return result.wrong() == 0 ? null : "rank " + comm.rank() + " " + type.ncclName() + " " + op.ncclName()
                + " count " + count + (inPlace ? " in place" : "") + ": " + result;
    }

    /** Reduce-scatter (sum, avg, max), all-gather and broadcast from every root at these counts; a barrier. */
    private static void otherCollectives(GpuTwoLevelCommunicator comm, DeviceBuffer big, DeviceBuffer small,
                                         List<String> failures, long[] counts) {
        int n = comm.size();
        int r = comm.rank();
        CudaStream stream = comm.stream();
        DataType type = DataType.FLOAT32;
        for (long count : counts) {
            long bytesAll = count * n * type.size();
            ByteBuffer host = ByteBuffer.allocateDirect((int) bytesAll);
            long h = BufferUtil.address(host);
            for (ReduceOp op : new ReduceOp[] {ReduceOp.SUM, ReduceOp.AVG, ReduceOp.MAX}) {
                ReferenceCheck rs = new ReferenceCheck(type, op, n, ReferenceCheck.seed(29, count, op));
                rs.fillInput(r, h, 0, count * n);
                big.copyFromHost(0, h, bytesAll, stream);
                small.fill((byte) 0x7f, stream);
                comm.reduceScatter(big.address(), small.address(), count, type, op);
                small.copyToHost(0, h, count * type.size(), stream);
                ReferenceCheck.Result res = rs.checkReduced(h, r * count, count);
                if (res.wrong() != 0) {
                    failures.add("reduceScatter " + op + " rank " + r + " count " + count + ": " + res);
                }
            }
            ReferenceCheck ag = new ReferenceCheck(type, ReduceOp.SUM, n, ReferenceCheck.seed(30, count));
            ag.fillInput(r, h, 0, count);
            small.copyFromHost(0, h, count * type.size(), stream);
            big.fill((byte) 0x7f, stream);
            comm.allGather(small.address(), big.address(), count, type);
            big.copyToHost(0, h, bytesAll, stream);
            for (int q = 0; q < n; q++) {
                ReferenceCheck.Result g = ag.checkCopy(q, h + q * count * type.size(), 0, count);
                if (g.wrong() != 0) {
                    failures.add("allGather rank " + r + " block " + q + " count " + count + ": " + g);
                }
            }
            for (int root = 0; root < n; root++) {
                ReferenceCheck bc = new ReferenceCheck(type, ReduceOp.SUM, n, ReferenceCheck.seed(31, count, root));
                bc.fillInput(r, h, 0, count);
                small.copyFromHost(0, h, count * type.size(), stream);
                boolean inPlace = (root & 1) == 0;
                DeviceBuffer out = inPlace ? small : big;
                if (!inPlace) {
                    big.fill((byte) 0x7f, stream);
                }
                comm.broadcast(small.address(), out.address(), count, type, root);
                out.copyToHost(0, h, count * type.size(), stream);
                ReferenceCheck.Result bres = bc.checkCopy(root, h, 0, count);
                if (bres.wrong() != 0) {
                    failures.add("broadcast root " + root + " rank " + r + " count " + count + ": " + bres);
                }
            }
            java.lang.ref.Reference.reachabilityFence(host);
        }
        comm.barrier();
        // The array overloads go through the GPU level's device staging.
        float[] data = new float[1001];
        for (int i = 0; i < data.length; i++) {
            data[i] = (float) Math.sin(i + r);
        }
        comm.allReduce(data, ReduceOp.SUM);
        for (int i = 0; i < data.length; i++) {
            double want = 0;
            for (int q = 0; q < n; q++) {
                want += (float) Math.sin(i + q);
            }
            if (Math.abs(want - data[i]) > 1e-4) {
                failures.add("array allReduce rank " + r + " element " + i + ": " + data[i] + ", want " + want);
                break;
            }
        }
    }
}
