package org.sparkccl.spark;

import com.codahale.metrics.MetricRegistry;
import java.time.Duration;
import java.util.Map;
import java.util.Random;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.spark.SparkConf;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.PluginContext;
import org.apache.spark.resource.ResourceInformation;
import org.sparkccl.arrow.ElementType;
import org.sparkccl.arrow.GradientBuffer;
import org.sparkccl.core.memory.SharedHostMemorySource;
import org.sparkccl.arrow.TensorLayout;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.DataType;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.bootstrap.TcpBootstrap;
import org.sparkccl.core.check.ReferenceCheck;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.engine.Engines;
import org.sparkccl.tools.launch.LaunchedRank;

/**
 * One path of sparkccl as the first thing a fresh JVM does, for {@link JvmFlagsTest}: that JVM is
 * started with Spark's executor options only (or none), so a path that needs a JVM flag fails here
 * as it would in a Spark executor. Prints {@code OK <path> ...} on success; any failure is an
 * exception and a non-zero exit.
 */
public final class JvmFlagsChild {
    private static final long SEED = 20_261_201L;

    private JvmFlagsChild() {
    }

    public static void main(String[] args) throws Exception {
        // Proves the test runs what it says: nobody exported jdk.internal.misc to us by a flag.
        if (Object.class.getModule().isExported("jdk.internal.misc", JvmFlagsChild.class.getModule())) {
            throw new IllegalStateException("this JVM was started with the jdk.internal.misc export; the test is void");
        }
        String path = args[0];
        switch (path) {
            case "executor-plugin": executorPlugin(); break;
            case "host": host(); break;
            case "arrow": arrow(); break;
            case "gpu": gpu(); break;
            default: throw new IllegalArgumentException("unknown path " + path);
        }
        System.out.println("OK " + path);
    }

    /** What an executor does at start with spark.plugins set (its GPU is fake here; CUDA is then reported missing). */
    private static void executorPlugin() {
        ExecutorPlugin plugin = new SparkCclPlugin().executorPlugin();
        plugin.init(new StartupContext(), Map.of("spark.sparkccl.timeoutMs", "30000"));
        plugin.shutdown();
    }

    /** A host communicator over shared memory between the launched processes, on raw off-heap memory. */
    private static void host() throws Exception {
        LaunchedRank me = LaunchedRank.fromEnvironment();
        try (TcpBootstrap bootstrap = me.bootstrap(Duration.ofMinutes(1));
             Communicator comm = Engines.host(bootstrap, Params.fromEnvironment())) {
            for (long count : new long[] {1, 1009, 300_007}) {
                ReferenceCheck check = new ReferenceCheck(DataType.FLOAT32, ReduceOp.SUM, me.size(), SEED + count);
                try (org.sparkccl.core.memory.HostStagingBuffer buffer = new org.sparkccl.core.memory.HostStagingBuffer(count * 4)) {
                    check.fillInput(me.rank(), buffer.address(), 0, count);
                    comm.allReduce(buffer.address(), buffer.address(), count, DataType.FLOAT32, ReduceOp.SUM);
                    ReferenceCheck.Result result = check.checkReduced(buffer.address(), 0, count);
                    if (result.wrong() > 0) {
                        throw new AssertionError("rank " + me.rank() + ", " + count + " floats: " + result);
                    }
                }
            }
        }
    }

    /** Arrow GradientBuffers, plain and from the communicator's shared memory, reduced in place. */
    private static void arrow() throws Exception {
        LaunchedRank me = LaunchedRank.fromEnvironment();
        TensorLayout layout = TensorLayout.builder().add("w", 7, 4001).add("b", 13).build();
        try (TcpBootstrap bootstrap = me.bootstrap(Duration.ofMinutes(1));
             Communicator comm = Engines.host(bootstrap, Params.fromEnvironment());
             BufferAllocator allocator = new RootAllocator()) {
            try (GradientBuffer plain = GradientBuffer.allocate(allocator, layout);
                 GradientBuffer shared = GradientBuffer.allocate(allocator, "shared", layout, ElementType.FLOAT32,
                         new SharedHostMemorySource(comm))) {
                fillAndCheck(plain, comm, me);
                fillAndCheck(shared, comm, me);
            }
        }
    }

    /**
     * The GPU engine (rank r on GPU r mod the visible GPUs) on device memory, and a pinned-memory
     * GradientBuffer reduced by it: the path that once failed in every Spark executor.
     */
    private static void gpu() throws Exception {
        LaunchedRank me = LaunchedRank.fromEnvironment();
        int device = me.rank() % org.sparkccl.ipc.cuda.GpuSupport.deviceCount();
        try (TcpBootstrap bootstrap = me.bootstrap(Duration.ofMinutes(1));
             Communicator comm = org.sparkccl.ipc.gpu.GpuCommunicators.create(bootstrap, device, Params.fromEnvironment());
             BufferAllocator allocator = new RootAllocator()) {
            long count = 1_000_003;
            ReferenceCheck check = new ReferenceCheck(DataType.FLOAT32, ReduceOp.SUM, me.size(), SEED);
            byte[] raw = new byte[(int) count * 4];
            try (org.sparkccl.core.memory.HostStagingBuffer host = new org.sparkccl.core.memory.HostStagingBuffer(count * 4);
                 org.sparkccl.core.StagingBuffer onDevice = comm.allocateStaging(count * 4)) {
                check.fillInput(me.rank(), host.address(), 0, count);
                host.copyOut(raw, raw.length);
                onDevice.copyIn(raw, raw.length);
                comm.allReduce(onDevice.address(), onDevice.address(), count, DataType.FLOAT32, ReduceOp.SUM);
                onDevice.copyOut(raw, raw.length);
                host.copyIn(raw, raw.length);
                ReferenceCheck.Result result = check.checkReduced(host.address(), 0, count);
                if (result.wrong() > 0) {
                    throw new AssertionError("rank " + me.rank() + " on GPU " + device + ": " + result);
                }
            }
            TensorLayout layout = TensorLayout.flat("g", 70_001);
            try (GradientBuffer pinned = GradientBuffer.allocate(allocator, "g", layout, ElementType.FLOAT32,
                    org.sparkccl.core.memory.HostMemorySources.preferred())) {
                fillAndCheck(pinned, comm, me);
            }
        }
    }

    private static void fillAndCheck(GradientBuffer g, Communicator comm, LaunchedRank me) {
        int n = me.size();
        long count = g.elementCount();
        for (long i = 0; i < count; i++) {
            g.setFloat(i, value(me.rank(), i));
        }
        g.allReduce(comm, ReduceOp.SUM);
        for (long i = 0; i < count; i++) {
            double expected = 0;
            for (int r = 0; r < n; r++) {
                expected += value(r, i);
            }
            if (Math.abs(g.getFloat(i) - expected) > 1e-5 * n) {
                throw new AssertionError("rank " + me.rank() + " " + g.name() + "[" + i + "] = " + g.getFloat(i)
                        + ", expected " + expected);
            }
        }
    }

    /** Rank r's element i: random in [-1, 1), from a seed (never zeros). */
    private static float value(int rank, long i) {
        return new Random(SEED * 31 + rank * 1_000_003L + i).nextFloat() * 2 - 1;
    }

    /** The context Spark hands an executor plugin at start: one (fake) GPU, a metrics registry. */
    private static final class StartupContext implements PluginContext {
        @Override
        public MetricRegistry metricRegistry() {
            return new MetricRegistry();
        }

        @Override
        public SparkConf conf() {
            return new SparkConf(false);
        }

        @Override
        public String executorID() {
            return "1";
        }

        @Override
        public String hostname() {
            return "127.0.0.1";
        }

        @Override
        public Map<String, ResourceInformation> resources() {
            return Map.of("gpu", new ResourceInformation("gpu", new String[] {"0"}));
        }

        @Override
        public void send(Object message) {
        }

        @Override
        public Object ask(Object message) {
            return null;
        }
    }
}
