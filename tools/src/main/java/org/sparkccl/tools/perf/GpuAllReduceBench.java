package org.sparkccl.tools.perf;

import org.sparkccl.ipc.gpu.GpuCommunicator;
import org.sparkccl.ipc.gpu.GpuCommunicators;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.Locale;
import java.util.concurrent.Callable;
import org.agrona.BufferUtil;
import org.sparkccl.core.Bootstrap;
import org.sparkccl.core.jdk.JdkAccess;
import org.sparkccl.core.bootstrap.ThreadGroupBootstrap;
import org.sparkccl.core.DataType;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.check.ReferenceCheck;
import org.sparkccl.core.param.Params;
import org.sparkccl.ipc.cuda.CudaGraph;
import org.sparkccl.ipc.cuda.CudaStream;
import org.sparkccl.ipc.cuda.DeviceBuffer;
import org.sparkccl.ipc.cuda.GpuSupport;
import org.sparkccl.tools.launch.LaunchedRank;
import org.sparkccl.tools.launch.RankLauncher;
import org.sparkccl.tools.perf.AllReducePerf.SizeConverter;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/**
 * AllReduce on GPUs in three modes, as nccl-tests reports its blocking flag and CUDA graphs: blocking
 * calls timed from the Java call to its return, in nccl-tests' columns {@code size count type time(us)
 * algbw busbw wrong}, then the mean host time of the launch call and the mean GPU time of the kernel
 * (first block start to last block end); then stream-ordered calls ({@code -n} queued back to back on one
 * stream, one synchronize, time / n) and the same {@code -n} calls captured in a CUDA graph and replayed
 * ({@code --graph-launches} replays, time / calls), each with its busbw. Every mode's output is checked
 * against the float64 / exact reference; {@code wrong} counts all three. Ranks are processes (one
 * per rank, {@link RankLauncher}) or threads of this JVM ({@code --threads}); rank r uses GPU
 * r mod gpus, so {@code --ranks-per-gpu K} gives K ranks per GPU.
 *
 * <pre>
 *   GpuAllReduceBench [-b 8] [-e 256M] [-f 2] [-g GPUS] [--ranks-per-gpu K] [-n iters] [-w warmup]
 *                     [-d float] [-o sum] [--threads] [--blocking-only] [--graph-launches 3]
 * </pre>
 * SPARKCCL_* settings (PROTO, NCHANNELS, P2P_DISABLE, BUFFSIZE, LL_THRESHOLD) apply.
 */
@Command(name = "GpuAllReduceBench", mixinStandardHelpOptions = true,
        description = "sparkccl's GPU all-reduce against the clock, one row per size, every size checked once")
public final class GpuAllReduceBench implements Callable<Integer> {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    @Spec
    private CommandSpec spec;

    @Option(names = "-b", defaultValue = "8", converter = SizeConverter.class, description = "smallest size in bytes")
    private long minBytes;

    @Option(names = "-e", defaultValue = "256M", converter = SizeConverter.class, description = "largest size in bytes")
    private long maxBytes;

    @Option(names = "-f", defaultValue = "2", description = "factor between sizes (1: one size)")
    private int factor;

    @Option(names = "-g", defaultValue = "-1", description = "GPUs to use (default: all visible)")
    private int gpus;

    @Option(names = "--ranks-per-gpu", defaultValue = "1", description = "ranks per GPU")
    private int ranksPerGpu;

    @Option(names = "-n", defaultValue = "20", description = "timed calls per size")
    private int iters;

    @Option(names = "-w", defaultValue = "5", description = "untimed calls per size")
    private int warmup;

    @Option(names = "-d", defaultValue = "float", converter = TypeConverter.class, description = "data type (nccl-tests' names)")
    private DataType type;

    @Option(names = "-o", defaultValue = "sum", converter = OpConverter.class, description = "reduction (nccl-tests' names)")
    private ReduceOp op;

    @Option(names = "--threads", description = "ranks as threads of this JVM instead of one process each")
    private boolean threads;

    @Option(names = "--blocking-only", description = "time blocking calls only (no stream-ordered or graph columns)")
    private boolean blockingOnly;

    @Option(names = "--graph-launches", defaultValue = "3", description = "timed replays of the graph of -n calls")
    private int graphLaunches;

    public static void main(String[] args) {
        System.exit(new CommandLine(new GpuAllReduceBench()).execute(args));
    }

    @Override
    public Integer call() throws Exception {
        if (factor < 1 || iters < 1 || warmup < 0 || ranksPerGpu < 1 || minBytes < 1 || maxBytes < minBytes
                || graphLaunches < 1) {
            throw new ParameterException(spec.commandLine(), "need -f >= 1, -n >= 1, -w >= 0, --ranks-per-gpu >= 1,"
                    + " --graph-launches >= 1 and 1 <= -b <= -e");
        }
        return run();
    }

    private int run() throws Exception {
        if (LaunchedRank.isLaunched()) {
            LaunchedRank me = LaunchedRank.fromEnvironment();
            try (Bootstrap bootstrap = me.bootstrap(Duration.ofMinutes(2))) {
                int visible = GpuSupport.deviceCount();
                return rank(bootstrap, me.rank() % (gpus > 0 ? Math.min(gpus, visible) : visible)) == 0 ? 0 : 1;
            }
        }
        String reason = GpuSupport.unavailableReason();
        if (reason != null) {
            System.err.println("GPUs cannot be used here: " + reason);
            return 2;
        }
        int g = gpus > 0 ? Math.min(gpus, GpuSupport.deviceCount()) : GpuSupport.deviceCount();
        int ranks = g * ranksPerGpu;
        if (!threads) {
            return RankLauncher.of(ranks, GpuAllReduceBench.class.getName())
                    .args(spec.commandLine().getParseResult().originalArgs())
                    .timeout(Duration.ofMinutes(9)).run().exitStatus();
        }
        java.util.concurrent.atomic.AtomicLong wrong = new java.util.concurrent.atomic.AtomicLong();
        new ThreadGroupBootstrap.Group(ranks).run(bootstrap -> {
            wrong.addAndGet(rank(bootstrap, bootstrap.rank() % g));
            return null;
        }, null);
        return wrong.get() == 0 ? 0 : 1;
    }

    /** Runs the sweep on one rank; returns the number of wrong elements it saw (the run fails if any). */
    private long rank(Bootstrap bootstrap, int device) {
        long wrongTotal = 0;
        Params params = Params.fromEnvironment();
        boolean print = bootstrap.rank() == 0;
        try (GpuCommunicator comm = GpuCommunicators.create(bootstrap, device, params);
             DeviceBuffer send = DeviceBuffer.allocate(comm.device(), Math.max(maxBytes, 64), "bench");
             DeviceBuffer recv = DeviceBuffer.allocate(comm.device(), Math.max(maxBytes, 64), "bench");
             CudaStream user = new CudaStream(comm.device(), "bench stream")) {
            if (print) {
                System.out.printf(Locale.ROOT, "# sparkccl GPU allreduce: %d rank(s), %s, %s%n", comm.size(),
                        threads ? "threads of one JVM" : "one process per rank", comm.describeLinks());
                System.out.printf(Locale.ROOT, "# settings: %s%n", params.describeSet());
                System.out.printf(Locale.ROOT, "%12s %12s %8s %6s %10s %9s %9s %7s %10s %10s %8s %8s %10s %9s %10s %9s%n",
                        "size(B)", "count", "type", "proto", "time(us)", "algbw", "busbw", "wrong", "launch(us)",
                        "kernel(us)", "host(us)", "wait(us)", "stream(us)", "busbw", "graph(us)", "busbw");
            }
            // A fresh JVM: the call path is interpreted for its first thousand calls or so.
            for (int i = 0; i < 2000; i++) {
                comm.allReduce(send.address(), recv.address(), Math.max(1, Math.min(minBytes, 64 << 10) / type.size()), type, op);
            }
            for (long bytes = minBytes; bytes <= maxBytes; bytes *= factor) {
                long count = Math.max(1, bytes / type.size());
                long size = count * type.size();
                ReferenceCheck reference = new ReferenceCheck(type, op, comm.size(), ReferenceCheck.seed(42, count));
                fillInput(comm, reference, send, count, size);
                long wrong = checked(comm, reference, recv, count, size,
                        () -> comm.allReduce(send.address(), recv.address(), count, type, op));
                for (int i = 0; i < warmup; i++) {
                    comm.allReduce(send.address(), recv.address(), count, type, op);
                }
                // The check above leaves large garbage (the reference); a young collection inside the timed
                // loop once stalled a rank for ~50 ms (2 MB: 575 us per call on average instead of 35).
                System.gc();
                bootstrap.barrier();
                long launchNanos = 0;
                long kernelNanos = 0;
                long hostNanos = 0;
                long waitNanos = 0;
                long t0 = System.nanoTime();
                for (int i = 0; i < iters; i++) {
                    comm.allReduce(send.address(), recv.address(), count, type, op);
                    launchNanos += comm.lastLaunchNanos();
                    kernelNanos += comm.lastKernelNanos();
                    hostNanos += comm.lastHostNanos();
                    waitNanos += comm.lastWaitNanos();
                }
                double us = (System.nanoTime() - t0) / 1e3 / iters;
                String blockingProbes = comm.probeSummary(iters);
                double algbw = size / us / 1e3;
                double busbw = busBandwidth(comm, size, us);
                String streamed = "";
                if (!blockingOnly) {
                    Timed stream = streamOrdered(bootstrap, comm, reference, send, recv, user, count, size);
                    String streamProbes = comm.probeSummary(iters);
                    Timed graph = graphReplayed(bootstrap, comm, reference, send, recv, user, count, size);
                    printProbes(comm, size, "stream", streamProbes);
                    printProbes(comm, size, "graph", comm.probeSummary(iters));
                    wrong += stream.wrong + graph.wrong;
                    streamed = String.format(Locale.ROOT, " %10.2f %9.2f %10.2f %9.2f", stream.us,
                            busBandwidth(comm, size, stream.us), graph.us, busBandwidth(comm, size, graph.us));
                }
                printProbes(comm, size, "blocking", blockingProbes);
                wrongTotal += wrong;
                if (print) {
                    System.out.printf(Locale.ROOT, "%12d %12d %8s %6s %10.2f %9.2f %9.2f %7d %10.2f %10.2f %8.2f %8.2f%s%n",
                            size, count, type.ncclName(), comm.algorithmFor(count, type), us, algbw, busbw, wrong,
                            launchNanos / 1e3 / iters, kernelNanos / 1e3 / iters, hostNanos / 1e3 / iters,
                            waitNanos / 1e3 / iters, streamed);
                }
                if (factor <= 1) {
                    break;
                }
            }
        }
        if (wrongTotal > 0) {
            System.err.printf(Locale.ROOT, "rank %d: %d wrong elements: the run fails%n", bootstrap.rank(), wrongTotal);
        }
        return wrongTotal;
    }

    /** SPARKCCL_PROBE=1: every rank's breakdown of its timed calls in one mode (GpuProbes), one line each. */
    private static void printProbes(GpuCommunicator comm, long size, String mode, String summary) {
        if (summary != null) {
            System.out.printf(Locale.ROOT, "PROBE rank %d %d B %s: %s%n", comm.rank(), size, mode, summary);
        }
    }

    private static double busBandwidth(GpuCommunicator comm, long size, double us) {
        return size / us / 1e3 * 2.0 * (comm.size() - 1) / comm.size();
    }

    /** This rank's input for {@code reference}; the timed calls of every mode reduce it (out of place). */
    private static void fillInput(GpuCommunicator comm, ReferenceCheck reference, DeviceBuffer send, long count,
                                  long size) {
        ByteBuffer host = ByteBuffer.allocateDirect((int) size);
        long h = BufferUtil.address(host);
        reference.fillInput(comm.rank(), h, 0, count);
        send.copyFromHost(0, h, size, comm.stream());
        java.lang.ref.Reference.reachabilityFence(host);
    }

    /**
     * Poisons the output, runs {@code calls} (which end with the output complete), and returns the number
     * of output elements that differ from the float64 / exact reference.
     */
    private static long checked(GpuCommunicator comm, ReferenceCheck reference, DeviceBuffer recv, long count,
                                long size, Runnable calls) {
        recv.fill((byte) 0x7f, comm.stream());
        calls.run();
        ByteBuffer host = ByteBuffer.allocateDirect((int) size);
        long h = BufferUtil.address(host);
        recv.copyToHost(0, h, size, comm.stream());
        long wrong = reference.checkReduced(h, 0, count).wrong();
        java.lang.ref.Reference.reachabilityFence(host);
        return wrong;
    }

    /** Mean time of one call and the wrong elements of the timed calls' output. */
    private record Timed(double us, long wrong) {
    }

    /** {@code -n} stream-ordered calls queued back to back, one synchronize: time / n, output checked. */
    private Timed streamOrdered(Bootstrap bootstrap, GpuCommunicator comm, ReferenceCheck reference, DeviceBuffer send,
                                DeviceBuffer recv, CudaStream user, long count, long size) {
        for (int i = 0; i < warmup; i++) {
            comm.allReduce(send.address(), recv.address(), count, type, op, user);
        }
        comm.synchronize(user);
        long[] nanos = new long[1];
        long wrong = checked(comm, reference, recv, count, size, () -> {
            System.gc(); // as before the blocking calls: no young collection inside the timed loop
            bootstrap.barrier();
            long t0 = System.nanoTime();
            for (int i = 0; i < iters; i++) {
                comm.allReduce(send.address(), recv.address(), count, type, op, user);
            }
            long queued = System.nanoTime() - t0;
            comm.synchronize(user);
            nanos[0] = System.nanoTime() - t0;
            // The host's share: where queueing a call takes about as long as a call, the host sets the pace.
            System.out.printf(Locale.ROOT, "STREAM rank %d %d B: queued in %.2f us per call, done in %.2f%n", comm.rank(),
                    size, queued / 1e3 / iters, nanos[0] / 1e3 / iters);
        });
        // The ranks in turn, each queueing its -n calls while the others wait: the host's cost of a call with
        // no other thread launching into the context, i.e. what one rank per process pays (ranks as threads of
        // one process share the context's launch path). The GPU runs them once the last rank has queued.
        long[] alone = new long[1];
        wrong += checked(comm, reference, recv, count, size, () -> {
            for (int turn = 0; turn < comm.size(); turn++) {
                bootstrap.barrier();
                if (turn == comm.rank()) {
                    long t0 = System.nanoTime();
                    for (int i = 0; i < iters; i++) {
                        comm.allReduce(send.address(), recv.address(), count, type, op, user);
                    }
                    alone[0] = System.nanoTime() - t0;
                }
            }
            comm.synchronize(user);
            System.out.printf(Locale.ROOT, "STREAM rank %d %d B: queued alone in %.2f us per call%n", comm.rank(), size,
                    alone[0] / 1e3 / iters);
        });
        return new Timed(nanos[0] / 1e3 / iters, wrong);
    }

    /**
     * The {@code -n} calls captured in a CUDA graph, replayed once untimed, then {@code --graph-launches}
     * times back to back with one synchronize: time / calls, output checked.
     */
    private Timed graphReplayed(Bootstrap bootstrap, GpuCommunicator comm, ReferenceCheck reference, DeviceBuffer send,
                                DeviceBuffer recv, CudaStream user, long count, long size) {
        try (CudaGraph graph = CudaGraph.capture(user, () -> {
            for (int i = 0; i < iters; i++) {
                comm.allReduce(send.address(), recv.address(), count, type, op, user);
            }
        }, "rank " + comm.rank())) {
            // Instantiating may wait for the GPU, so for a peer's kernel (ranks sharing a GPU): nobody launches
            // before every rank has its graph.
            bootstrap.barrier();
            graph.launch(user);
            comm.synchronize(user);
            long[] nanos = new long[1];
            long wrong = checked(comm, reference, recv, count, size, () -> {
                System.gc();
                bootstrap.barrier();
                long t0 = System.nanoTime();
                for (int i = 0; i < graphLaunches; i++) {
                    graph.launch(user);
                }
                comm.synchronize(user);
                nanos[0] = System.nanoTime() - t0;
            });
            return new Timed(nanos[0] / 1e3 / iters / graphLaunches, wrong);
        }
    }

    static final class TypeConverter implements CommandLine.ITypeConverter<DataType> {
        @Override
        public DataType convert(String value) {
            return DataType.fromName(value);
        }
    }

    static final class OpConverter implements CommandLine.ITypeConverter<ReduceOp> {
        @Override
        public ReduceOp convert(String value) {
            return ReduceOp.fromName(value);
        }
    }
}
