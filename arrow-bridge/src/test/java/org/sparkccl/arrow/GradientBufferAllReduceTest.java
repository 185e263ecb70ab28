package org.sparkccl.arrow;

import org.sparkccl.core.memory.HostMemorySource;
import org.sparkccl.core.memory.OffHeapMemorySource;
import org.sparkccl.core.memory.SharedHostMemorySource;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.sparkccl.core.Bootstrap;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.shm.ShmCommunicator;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.bootstrap.TcpBootstrap;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.transport.LocalMemoryTransport;

/**
 * N ranks as threads, each with its own allocator and GradientBuffer, bootstrapped over TCP on
 * 127.0.0.1 and reducing through ShmCommunicator over LOCAL memory: the buffer's ArrowBuf memory is
 * reduced in place and checked against a float64 reference computed from what every rank stored.
 */
class GradientBufferAllReduceTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(60);

    static List<Arguments> cases() {
        List<Arguments> list = new ArrayList<>();
        for (ElementType type : ElementType.values()) {
            list.add(Arguments.of(3, type, ReduceOp.SUM, layout(1009), false));
        }
        list.add(Arguments.of(4, ElementType.FLOAT32, ReduceOp.SUM, layout(262_147), false)); // ~1 MB: past the LL sizes
        list.add(Arguments.of(2, ElementType.FLOAT32, ReduceOp.AVG, layout(1), false));
        list.add(Arguments.of(3, ElementType.FLOAT64, ReduceOp.MAX, layout(4099), false));
        list.add(Arguments.of(4, ElementType.BFLOAT16, ReduceOp.SUM, layout(70_001), false));
        // Shared memory: from 64 KB the all-reduce reads the peers' gradient buffers in place.
        list.add(Arguments.of(2, ElementType.FLOAT32, ReduceOp.SUM, layout(262_147), true));
        list.add(Arguments.of(3, ElementType.FLOAT64, ReduceOp.MAX, layout(20_011), true));
        list.add(Arguments.of(2, ElementType.FLOAT32, ReduceOp.AVG, layout(7), true));
        return list;
    }

    /** A model-like layout of {@code total} elements: a matrix, a vector and the rest. */
    static TensorLayout layout(int total) {
        if (total < 16) {
            return TensorLayout.flat("w", total);
        }
        int rows = 7;
        int cols = total / 16;
        int bias = total / 32;
        return TensorLayout.builder().add("w", rows, cols).add("b", bias).add("rest", total - rows * cols - bias).build();
    }

    @ParameterizedTest(name = "{0} ranks, {1} {2}, {3}, shared memory {4}")
    @MethodSource("cases")
    void reducesInPlaceOnArrowMemory(int n, ElementType type, ReduceOp op, TensorLayout layout, boolean shared)
            throws Exception {
        double[][] stored = new double[n][];
        double[][] results = new double[n][];
        long[] allocatedAfterClose = new long[n];
        ExecutorService pool = Executors.newFixedThreadPool(n);
        try (TcpBootstrap.Rendezvous rendezvous = TcpBootstrap.listen(TcpBootstrap.loopback(0), n, TIMEOUT, "arrow")) {
            InetSocketAddress address = rendezvous.localAddress();
            List<Future<?>> ranks = new ArrayList<>();
            for (int r = 0; r < n; r++) {
                int rank = r;
                ranks.add(pool.submit(() -> {
                    try (Bootstrap bootstrap = rank == 0 ? rendezvous.awaitRanks()
                            : TcpBootstrap.connect(address, rank, n, TIMEOUT, "arrow")) {
                        runRank(bootstrap, type, op, layout, shared, stored, results, allocatedAfterClose);
                    }
                    return null;
                }));
            }
            for (Future<?> f : ranks) {
                f.get(120, TimeUnit.SECONDS);
            }
        } finally {
            pool.shutdownNow();
        }

        int count = (int) layout.elementCount();
        double eps = GradientBufferTest.tolerance(type);
        for (int i = 0; i < count; i++) {
            double expect = reference(stored, i, op);
            double magnitude = 0;
            for (double[] s : stored) {
                magnitude += Math.abs(s[i]);
            }
            // Each partial sum may round once in the element type.
            double tol = n * eps * magnitude + 1e-300;
            for (int r = 0; r < n; r++) {
                assertEquals(expect, results[r][i], tol, "rank " + r + " element " + i);
            }
        }
        for (int r = 0; r < n; r++) {
            assertEquals(0, allocatedAfterClose[r], "rank " + r + " leaked Arrow memory");
        }
        assertEquals(0, LocalMemoryTransport.outstandingBytesInJvm(), "LOCAL regions left behind");
    }

    private static void runRank(Bootstrap bootstrap, ElementType type, ReduceOp op, TensorLayout layout, boolean shared,
            double[][] stored, double[][] results, long[] allocatedAfterClose) {
        int rank = bootstrap.rank();
        BufferAllocator allocator = new RootAllocator();
        HostMemorySource source;
        try (Communicator comm = ShmCommunicator.create(bootstrap, List.of(new LocalMemoryTransport()),
                Params.defaults())) {
            source = shared ? new SharedHostMemorySource(comm) : new OffHeapMemorySource();
            reduce(comm, allocator, source, type, op, layout, stored, results);
        }
        allocatedAfterClose[rank] = allocator.getAllocatedMemory();
        assertEquals(0, source.outstandingBytes());
        allocator.close();
    }

    private static void reduce(Communicator comm, BufferAllocator allocator, HostMemorySource source, ElementType type,
            ReduceOp op, TensorLayout layout, double[][] stored, double[][] results) {
        int rank = comm.rank();
        try (GradientBuffer g = GradientBuffer.allocate(allocator, "gradients", layout, type, source)) {
            Random rnd = new Random(1000L * rank + type.ordinal());
            double[] values = new double[(int) g.elementCount()];
            for (int i = 0; i < values.length; i++) {
                values[i] = rnd.nextGaussian();
            }
            g.copyFrom(values);
            stored[rank] = g.toDoubleArray(); // what the rank really holds, after rounding to the type
            long address = g.address();

            g.allReduce(comm, op);

            assertEquals(address, g.vector().getDataBuffer().memoryAddress(), "reduced in place");
            results[rank] = g.toDoubleArray();
        }
    }

    private static double reference(double[][] stored, int i, ReduceOp op) {
        double acc = op == ReduceOp.MAX ? Double.NEGATIVE_INFINITY : 0;
        for (double[] s : stored) {
            acc = op == ReduceOp.MAX ? Math.max(acc, s[i]) : acc + s[i];
        }
        return op == ReduceOp.AVG ? acc / stored.length : acc;
    }
}
