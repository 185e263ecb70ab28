package org.sparkccl.tools.perf;

import java.io.IOException;
import java.io.PrintStream;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import org.agrona.UnsafeApi;
import org.jfree.data.xy.XYSeries;
import org.jfree.data.xy.XYSeriesCollection;
import org.sparkccl.core.Bootstrap;
import org.sparkccl.core.CclException;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.DataType;
import org.sparkccl.core.shm.ShmCommunicator;
import org.sparkccl.core.memory.HostStagingBuffer;
import org.sparkccl.core.jdk.JdkAccess;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.bootstrap.TcpBootstrap;
import org.sparkccl.core.check.ReferenceCheck;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.engine.Engines;
import org.sparkccl.ipc.gpu.GpuCommunicator;
import org.sparkccl.ipc.gpu.GpuTwoLevelCommunicator;
import org.sparkccl.tools.launch.CpuBinding;
import org.sparkccl.tools.launch.LaunchResult;
import org.sparkccl.tools.launch.LaunchedRank;
import org.sparkccl.tools.launch.RankLauncher;
import org.sparkccl.train.plot.Charts;
import org.sparkccl.core.shm.ShmTransport;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Spec;

/**
 * nccl-tests' {@code all_reduce_perf} for sparkccl: the same flags, the same table. Started by the
 * user, it checks the flags and launches {@code -g N} ranks as processes of this host (as
 * {@code mpirun -np N} would); each rank runs the sweep, and rank 0 prints.
 *
 * <p>Per size and placement: {@code -n} timed iterations after a barrier; the time is the
 * per-iteration mean on each rank, then the maximum over ranks (all-reduced with MAX through the
 * communicator under test). With {@code -c N}, N more iterations run on fresh random data and every
 * element is compared with a float64 (or exact integer) reference; #wrong sums over ranks.
 */
@Command(name = "allreduce-perf", mixinStandardHelpOptions = true, sortOptions = false, usageHelpWidth = 100,
        description = {"Ring AllReduce benchmark in the style of nccl-tests' all_reduce_perf: "
                + "starts -g ranks as processes on this host and prints time, algbw and busbw per size."},
        footer = {"", "SPARKCCL_* environment variables (SPARKCCL_DEBUG=INFO, SPARKCCL_BUFFSIZE, ...) reach every rank."})
public final class AllReducePerf implements Callable<Integer> {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    private static final long SEED = 0x5CC1_2024L;
    private static final Duration BOOTSTRAP_TIMEOUT = Duration.ofMinutes(2);
    /**
     * Calls that make the JIT compile the small-message (LL) and large-message (Simple) paths before
     * timing. Measured: two rank processes need about 20 000 small calls before a 1 KB call settles
     * at 2-3 us (it starts near 50 us); 2 000 left the table timing half-compiled code.
     */
    private static final int JIT_WARMUP_SMALL_CALLS = 30000;
    /**
     * Calls at 128 KB, the smallest size of the large-message paths (Simple ring; direct on shared
     * buffers): measured with -R 1, 20 calls at 1 MB left the direct path to be compiled inside the
     * first timed rows above 64 KB (128 KB - 1 MB rows at a quarter of their later speed).
     */
    private static final int JIT_WARMUP_MID_CALLS = 2000;
    private static final int JIT_WARMUP_LARGE_CALLS = 50;
    /**
     * CPU ranks compile with C2 only. With tiered compilation the hot path kept being recompiled
     * (C1 to C2) and deoptimized after the warm-up, and on a machine with as many cores as ranks each
     * compiler run takes a rank's core for milliseconds inside a timed row (PrintCompilation showed
     * ShmCommunicator.allReduce "made not entrant" during the 1 KB rows). Measured, 2 ranks, 1 KB
     * out/in place, three runs each: tiered 2.29/65.6, 1.52/4.02, 9.13/7.59 us; C2 only 1.62/1.20,
     * 1.52/1.03, 3.13/0.86 us. (GPU ranks keep tiered compilation: their few calls per row would
     * run interpreted until C2's threshold.)
     */
    private static final List<String> CPU_RANK_JVM_OPTIONS = List.of("-XX:-TieredCompilation");

    @Spec
    private CommandSpec spec;

    @Option(names = {"-b", "--minbytes"}, defaultValue = "32M", converter = SizeConverter.class, paramLabel = "SIZE",
            description = "smallest message, in bytes (K, M, G suffixes); default ${DEFAULT-VALUE}")
    long minBytes;

    @Option(names = {"-e", "--maxbytes"}, defaultValue = "32M", converter = SizeConverter.class, paramLabel = "SIZE",
            description = "largest message; default ${DEFAULT-VALUE}")
    long maxBytes;

    @Option(names = {"-i", "--stepbytes"}, defaultValue = "1M", converter = SizeConverter.class, paramLabel = "SIZE",
            description = "increment between sizes when -f is 1; default ${DEFAULT-VALUE}")
    long stepBytes;

    @Option(names = {"-f", "--stepfactor"}, defaultValue = "1", paramLabel = "N",
            description = "multiplication factor between sizes (1: add -i instead); default ${DEFAULT-VALUE}")
    long stepFactor;

    @Option(names = {"-g", "--ngpus"}, defaultValue = "1", paramLabel = "N",
            description = "ranks, each a process of this host; default ${DEFAULT-VALUE}")
    int ranks;

    @Option(names = "--ranks-per-gpu", defaultValue = "1", paramLabel = "K",
            description = "with --device gpu: K rank processes per GPU, -g x K in all, rank r on GPU r mod -g (4- and "
                    + "8-rank rings on 2 GPUs; processes sharing a GPU time-slice, so this tests correctness, not "
                    + "speed); default ${DEFAULT-VALUE}")
    int ranksPerGpu;

    @Option(names = {"-n", "--iters"}, defaultValue = "20", paramLabel = "N",
            description = "timed iterations per size; default ${DEFAULT-VALUE}")
    int iters;

    @Option(names = {"-w", "--warmup_iters"}, defaultValue = "5", paramLabel = "N",
            description = "untimed iterations at the largest and smallest size first, and before each timed size; default ${DEFAULT-VALUE}")
    int warmupIters;

    @Option(names = {"-c", "--check"}, defaultValue = "1", paramLabel = "N",
            description = "checked iterations per size on random data (0: no check); default ${DEFAULT-VALUE}")
    int checkIters;

    @Option(names = {"-z", "--blocking"}, defaultValue = "1", paramLabel = "0|1",
            description = "1: each timed call returns when its all-reduce is complete; 0 (--device gpu): the -n calls"
                    + " of a row are queued back to back on a CUDA stream (stream-ordered) and waited for once, as"
                    + " nccl-tests' -z 0; the time is then the row's / -n; default ${DEFAULT-VALUE}")
    int blocking;

    @Option(names = {"-G", "--cudagraph"}, defaultValue = "0", paramLabel = "N",
            description = "(--device gpu) the -n calls of a row are captured in a CUDA graph (stream-ordered calls), which"
                    + " is replayed N times back to back and waited for once, as nccl-tests' -G N; the time is then the"
                    + " row's / (-n x N); 0: no graph; default ${DEFAULT-VALUE}")
    int graphLaunches;

    @Option(names = {"-d", "--datatype"}, defaultValue = "float", paramLabel = "TYPE",
            description = "float, double, half, bfloat16, int32, int64, int8, uint8 or all; default ${DEFAULT-VALUE}")
    String datatype;

    @Option(names = {"-o", "--op"}, defaultValue = "sum", paramLabel = "OP",
            description = "sum, prod, min, max, avg or all; default ${DEFAULT-VALUE}")
    String op;

    @Option(names = {"-R", "--local_register"}, defaultValue = "0", paramLabel = "0|1",
            description = "1: send and receive buffers in memory every rank maps (Communicator.allocateShared,"
                    + " as nccl-tests' -R registers them), so all-reduces may read peers' buffers in place; host"
                    + " memory only; default ${DEFAULT-VALUE}")
    int register;

    @Option(names = "--proto", paramLabel = "PROTO",
            description = "LL, Simple, LL128 (GPUs over NVLink or sharing one) or auto (the tuner picks by size);"
                    + " default: SPARKCCL_PROTO, else auto")
    String proto;

    @Option(names = "--algo", paramLabel = "ALGO",
            description = "all-reduce algorithm: Ring, OneShot (up to SPARKCCL_ONESHOT_THRESHOLD bytes, ring above),"
                    + " Direct (shared buffers, -R 1) or auto; default: SPARKCCL_ALGO, else auto")
    String algo;

    @Option(names = "--channels", paramLabel = "N",
            description = "channels (parallel rings); default: SPARKCCL_NCHANNELS, else 1")
    Integer channels;

    @Option(names = "--transport", defaultValue = "auto", paramLabel = "NAME",
            description = "auto (shared memory on one host, TCP across hosts), shm, or socket (TCP between every"
                    + " pair of neighbours, as SPARKCCL_SHM_DISABLE=1); default ${DEFAULT-VALUE}")
    String transport;

    @Option(names = "--pretend-hosts", defaultValue = "0", paramLabel = "H",
            description = "rank r says it runs on host r * H / ranks (SPARKCCL_HOST_ID), so ranks of this machine"
                    + " form H hosts: with --transport auto the two-level all-reduce (shared memory, or the GPU engine"
                    + " with --device gpu, inside a host; TCP across, through pinned host memory on GPUs); 0: the real"
                    + " host; default ${DEFAULT-VALUE}")
    int pretendHosts;

    @Option(names = "--device", defaultValue = "auto", paramLabel = "KIND",
            description = "cpu (host memory), gpu (rank r on GPU r mod the visible GPUs) or auto: gpu where GPUs"
                    + " and the kernels are present; default ${DEFAULT-VALUE}")
    String device;

    @Option(names = "--rewrite-input",
            description = "CPU only: before each timed call each rank rewrites its input (untimed), as a training step"
                    + " rewrites its gradients; the time is then the sum of the calls alone. nccl-tests leaves buffers"
                    + " alone between calls, which on the CPU lets data stay in the cache of the core that last used it")
    boolean rewriteInput;

    @Option(names = "--call-stats",
            description = "each rank also prints, per row, its calls' minimum, median, 90th percentile and maximum in us"
                    + " (to stderr; the table's time stays the average, as nccl-tests')")
    boolean callStats;

    @Option(names = "--first-calls", defaultValue = "0", paramLabel = "N",
            description = "first times N calls of the smallest size (out of place) one by one, before any warm-up, and"
                    + " prints (slowest rank) the first call, the means of calls 1-10, 11-100, 1-100 and 101-N and the"
                    + " medians of calls 1-10 and 1-100: what a job's"
                    + " first steps pay for class loading and the JIT; 0 (default) skips it")
    int firstCalls;

    /** How long this rank took to build its communicator (its warm-up included), for --first-calls. */
    private double buildMs;

    @Option(names = "--tiered-jit",
            description = "CPU ranks keep the JVM's default tiered compilation, as a Spark executor runs, instead of"
                    + " C2 only (see --first-calls)")
    boolean tieredJit;

    @Option(names = "--bind-to", defaultValue = "auto", paramLabel = "core|none|auto",
            description = "core: rank r's calling thread runs on the r-th CPU this process may use (mpirun --bind-to"
                    + " core); none: unbound; auto (default): core for CPU ranks when there are at most 2 ranks and"
                    + " enough CPUs, as mpirun's default, else none")
    String bindTo;

    @Option(names = "--csv", paramLabel = "FILE", description = "also write the results to FILE as CSV (rank 0)")
    Path csv;
    @Option(names = "--plot", paramLabel = "FILE",
            description = "also draw busbw and time against size (log axes, a line per placement, type and op) into FILE as PNG (rank 0)")
    Path plot;

    public static void main(String[] args) {
        // Ranks get the user's arguments plus the resolved --device; the last one given wins.
        System.exit(new CommandLine(new AllReducePerf()).setOverwrittenOptionsAllowed(true).execute(args));
    }

    @Override
    public Integer call() {
        List<DataType> types = types();
        List<ReduceOp> ops = ops();
        validate();
        if (!LaunchedRank.isLaunched()) {
            return launch();
        }
        return runRank(LaunchedRank.fromEnvironment(), types, ops);
    }

    private void validate() {
        if (ranks < 1) {
            throw bad("-g must be at least 1, got " + ranks);
        }
        if (ranksPerGpu < 1) {
            throw bad("--ranks-per-gpu must be at least 1, got " + ranksPerGpu);
        }
        if (minBytes < 0 || maxBytes < minBytes) {
            throw bad("need 0 <= -b <= -e, got -b " + minBytes + " -e " + maxBytes);
        }
        if (stepFactor < 1) {
            throw bad("-f must be at least 1, got " + stepFactor);
        }
        if (stepFactor == 1 && stepBytes <= 0 && maxBytes > minBytes) {
            throw bad("-i must be positive when -f is 1, or the sizes never reach -e");
        }
        if (iters < 1 || warmupIters < 0 || checkIters < 0) {
            throw bad("need -n >= 1, -w >= 0, -c >= 0");
        }
        if (blocking != 0 && blocking != 1) {
            throw bad("-z takes 0 or 1, got " + blocking);
        }
        if (graphLaunches < 0) {
            throw bad("-G takes a number of graph launches >= 0, got " + graphLaunches);
        }
        if (graphLaunches > 0 && !device.equalsIgnoreCase("gpu")) {
            throw bad("-G captures calls in a CUDA graph: it needs --device gpu");
        }
        if (graphLaunches > 0 && pretendHosts > 0) {
            throw bad("-G captures stream-ordered calls, which the GPU engine does not offer across hosts yet");
        }
        if (register != 0 && register != 1) {
            throw bad("-R takes 0 or 1, got " + register);
        }
        if (channels != null && channels < 1) {
            throw bad("--channels must be at least 1, got " + channels);
        }
        if (algo != null && !List.of("auto", "ring", "oneshot", "direct").contains(algo.toLowerCase(Locale.ROOT))) {
            throw bad("--algo takes Ring, OneShot, Direct or auto, got '" + algo + "'");
        }
        if (proto != null && !proto.equalsIgnoreCase("auto") && !proto.equalsIgnoreCase("LL")
                && !proto.equalsIgnoreCase("Simple")) {
            throw bad("--proto takes LL, Simple or auto, got '" + proto + "'");
        }
        switch (device.toLowerCase(Locale.ROOT)) {
            case "auto":
                device = Engines.gpuUnavailableReason() == null ? "gpu" : "cpu";
                break;
            case "cpu":
                break;
            case "gpu":
                String why = Engines.gpuUnavailableReason();
                if (why != null) {
                    throw bad("--device gpu: " + why + "; use --device cpu");
                }
                break;
            default: throw bad("--device takes cpu, gpu or auto, got '" + device + "'");
        }
        if (ranksPerGpu > 1 && !device.equalsIgnoreCase("gpu")) {
            throw bad("--ranks-per-gpu needs --device gpu (on the CPU, -g is the number of ranks)");
        }
        if (blocking == 0 && !device.equalsIgnoreCase("gpu")) {
            throw bad("-z 0 queues calls on a CUDA stream: it needs --device gpu (host calls are blocking)");
        }
        if (rewriteInput && device.equalsIgnoreCase("gpu")) {
            throw bad("--rewrite-input rewrites host memory; use --device cpu");
        }
        if (register == 1 && device.equalsIgnoreCase("gpu")) {
            throw bad("-R 1 shares host memory between ranks; the GPU engine has no shared buffers yet: use --device cpu");
        }
        switch (bindTo.toLowerCase(Locale.ROOT)) {
            case "core": case "none": break;
            case "auto":
                bindTo = device.equalsIgnoreCase("cpu") && ranks <= 2 && ranks <= CpuBinding.allowedCpus().size()
                        ? "core" : "none";
                break;
            default: throw bad("--bind-to takes core, none or auto, got '" + bindTo + "'");
        }
        if (pretendHosts < 0 || pretendHosts > ranks) {
            throw bad("--pretend-hosts takes 0 .. -g (" + ranks + "), got " + pretendHosts);
        }
        if (pretendHosts > 0 && blocking == 0 && device.equalsIgnoreCase("gpu")) {
            throw bad("-z 0 queues calls on a CUDA stream, which the GPU engine does not offer across hosts yet:"
                    + " use -z 1 with --pretend-hosts");
        }
        if (pretendHosts > 0 && transport.equalsIgnoreCase("shm")) {
            throw bad("--pretend-hosts needs --transport auto or socket: shared memory alone cannot cross hosts");
        }
        switch (transport.toLowerCase(Locale.ROOT)) {
            case "auto": case "shm": break;
            case "socket": break;
            default: throw bad("--transport takes auto, shm or socket, got '" + transport + "'");
        }
    }

    /** The user's process: start the ranks, forward their output, end as mpirun does. */
    private int launch() {
        List<String> args = new java.util.ArrayList<>(spec.commandLine().getParseResult().originalArgs());
        args.add("--device=" + device); // what auto resolved to, so that every rank agrees
        args.add("--bind-to=" + bindTo);
        RankLauncher launcher = RankLauncher.of(ranks * ranksPerGpu, AllReducePerf.class.getName()).args(args);
        if (device.equalsIgnoreCase("cpu") && !tieredJit) {
            launcher.jvmOptions(CPU_RANK_JVM_OPTIONS.toArray(new String[0]));
        }
        LaunchResult result = launcher.run();
        if (!result.succeeded()) {
            System.err.println("allreduce-perf: " + result.failure());
        }
        return result.exitStatus();
    }

    private int runRank(LaunchedRank me, List<DataType> types, List<ReduceOp> ops) {
        int cores = Runtime.getRuntime().availableProcessors(); // before binding narrows this thread's view
        Params params = params();
        if (pretendHosts > 0) {
            params = params.withOverrides(Map.of("SPARKCCL_HOST_ID", "perf-host-" + me.rank() * pretendHosts / ranks));
        }
        try (TcpBootstrap bootstrap = me.bootstrap(BOOTSTRAP_TIMEOUT)) {
            boolean gpu = device.equalsIgnoreCase("gpu");
            int ordinal = gpu ? me.rank() % Math.min(ranks, Engines.visibleGpus()) : me.rank();
            long buildStart = System.nanoTime();
            try (Communicator comm = communicator(bootstrap, gpu, ordinal, params);
                 PerfMemory memory = gpu ? deviceMemory(comm, Math.max(8, maxBytes))
                         : new HostPerfMemory(comm, Math.max(8, maxBytes), register == 1);
                 HostStagingBuffer savedInput = rewriteInput ? zeroed(new HostStagingBuffer(Math.max(8, maxBytes))) : null;
                 QueuedGpuCalls queued = blocking == 0 || graphLaunches > 0 ? new QueuedGpuCalls((GpuCommunicator) comm) : null) {
                // Bound only now: the communicator sizes its spinning by the cores the creating
                // thread may use, which binding narrows to one.
                String bound = bind(me.rank());
                buildMs = (System.nanoTime() - buildStart) / 1e6;
                String devices = describeDevices(bootstrap, gpu, ordinal, cores, bound);
                return new Sweep(comm, memory, savedInput == null ? 0 : savedInput.address(), queued,
                        me.rank() == 0 ? System.out : null, types, ops, bootstrap::barrier).run(devices);
            }
        } catch (CclException e) {
            System.err.println("allreduce-perf rank " + me.rank() + ": " + e.getMessage());
            return 1;
        }
    }

    /** Benchmark buffers on the rank's GPU, copied through its communicator's stream (one host or two-level). */
    private static PerfMemory deviceMemory(Communicator comm, long bytes) {
        if (comm instanceof GpuTwoLevelCommunicator twoLevel) {
            return new DevicePerfMemory(twoLevel.device(), twoLevel.stream(), bytes);
        }
        GpuCommunicator one = (GpuCommunicator) comm;
        return new DevicePerfMemory(one.device(), one.stream(), bytes);
    }

    /** Binds this rank's calling thread if asked; returns what the device line says about it. */
    private String bind(int rank) {
        if (!bindTo.equalsIgnoreCase("core")) {
            return "";
        }
        List<Integer> cpus = CpuBinding.allowedCpus();
        if (cpus.isEmpty()) {
            System.err.println("allreduce-perf rank " + rank + ": --bind-to core: cannot tell which CPUs this process may"
                    + " use (/proc/self/status); running unbound");
            return ", unbound";
        }
        int cpu = cpus.get(rank % cpus.size());
        String why = CpuBinding.bindCallingThread(cpu);
        if (why != null) {
            System.err.println("allreduce-perf rank " + rank + ": --bind-to core: " + why + "; running unbound");
            return ", unbound";
        }
        return ", bound to cpu " + cpu;
    }

    private Params params() {
        Map<String, String> overrides = new LinkedHashMap<>();
        if (proto != null) {
            overrides.put("SPARKCCL_PROTO", proto);
        }
        if (channels != null) {
            overrides.put("SPARKCCL_NCHANNELS", channels.toString());
        }
        if (algo != null) {
            overrides.put("SPARKCCL_ALGO", algo);
        }
        if (transport.equalsIgnoreCase("socket")) {
            overrides.put("SPARKCCL_SHM_DISABLE", "1");
        }
        Params environment = Params.fromEnvironment();
        if (!environment.isSet(Params.SOCKET_ADDRESS)) {
            overrides.put("SPARKCCL_SOCKET_ADDRESS", "127.0.0.1"); // every rank is a process of this host
        }
        return environment.withOverrides(overrides);
    }

    /** The engine under test: the shared-memory one alone for {@code --transport shm} on the CPU, else as chosen. */
    private Communicator communicator(Bootstrap bootstrap, boolean gpu, int ordinal, Params params) {
        if (!gpu && transport.equalsIgnoreCase("shm")) {
            return ShmCommunicator.create(bootstrap, List.of(new ShmTransport(params)), params);
        }
        return Engines.create(gpu ? Engines.Kind.GPU : Engines.Kind.HOST, bootstrap, ordinal, params, () -> false);
    }

    /** nccl-tests' "Using devices" lines, one per rank, gathered through the bootstrap. */
    private static String describeDevices(Bootstrap bootstrap, boolean gpu, int ordinal, int cores, String bound) {
        String host;
        try {
            host = InetAddress.getLocalHost().getHostName();
        } catch (IOException e) {
            host = "localhost";
        }
        String mine = gpu
                ? String.format(Locale.ROOT, "#  Rank %2d Group  0 Pid %6d on %10s device %2d [gpu] CUDA device %d",
                        bootstrap.rank(), ProcessHandle.current().pid(), host, ordinal, ordinal)
                : String.format(Locale.ROOT, "#  Rank %2d Group  0 Pid %6d on %10s device %2d [cpu] host memory, %d cores%s",
                        bootstrap.rank(), ProcessHandle.current().pid(), host, bootstrap.rank(),
                        cores, bound);
        byte[][] all = bootstrap.allGather(mine.getBytes(StandardCharsets.UTF_8));
        StringBuilder lines = new StringBuilder();
        for (byte[] line : all) {
            lines.append(new String(line, StandardCharsets.UTF_8)).append('\n');
        }
        return lines.toString();
    }

    /** One rank's run of the whole sweep. */
    private final class Sweep {
        private final Communicator comm;
        private final PerfMemory memory;
        /** Rank 0 prints; the others pass null. */
        private final PrintStream out;
        private final List<DataType> types;
        private final List<ReduceOp> ops;
        private final long send;
        private final long recv;
        /** --rewrite-input: a copy of the row's input that each timed call starts from (0 without). */
        private final long saved;
        /** -z 0: the timed calls are queued on a stream (null: blocking calls). */
        private final QueuedGpuCalls queued;
        /** A barrier outside the communicator (the launcher's bootstrap): lines the ranks up before --first-calls. */
        private final Runnable bootstrapBarrier;

        Sweep(Communicator comm, PerfMemory memory, long saved, QueuedGpuCalls queued, PrintStream out,
              List<DataType> types, List<ReduceOp> ops, Runnable bootstrapBarrier) {
            this.bootstrapBarrier = bootstrapBarrier;
            this.queued = queued;
            this.comm = comm;
            this.memory = memory;
            this.out = out;
            this.types = types;
            this.ops = ops;
            this.send = memory.send();
            this.recv = memory.recv();
            this.saved = saved;
        }

        int run(String devices) {
            try (PerfCsv csvOut = out != null && csv != null ? new PerfCsv(csv) : null) {
                PerfTable table = new PerfTable(out != null ? out : nullStream());
                XYSeriesCollection busBw = new XYSeriesCollection();
                XYSeriesCollection time = new XYSeriesCollection();
                if (out != null) {
                    printHeader(devices);
                    table.printColumnHeader();
                }
                if (firstCalls > 0) {
                    firstCalls(types.get(0), ops.get(0));
                }
                warmUpJit(types.get(0), ops.get(0));
                for (DataType type : types) {
                    for (ReduceOp reduceOp : ops) {
                        warmUp(type, reduceOp);
                        for (long size = minBytes; size <= maxBytes && size >= 0; size = next(size)) {
                            long count = size / type.size();
                            long bytes = count * type.size();
                            PerfTable.Measurement outOfPlace = measure(type, reduceOp, count, false);
                            PerfTable.Measurement inPlace = measure(type, reduceOp, count, true);
                            table.printRow(bytes, count, type.ncclName(), reduceOp.ncclName(), -1, outOfPlace, inPlace);
                            if (csvOut != null) {
                                csvOut.row(bytes, count, type.ncclName(), reduceOp.ncclName(), -1, outOfPlace, inPlace,
                                        comm.size(), describeSettings());
                            }
                            if (out != null && plot != null && bytes > 0) {
                                String what = types.size() * ops.size() > 1 ? type.ncclName() + " " + reduceOp.ncclName() + ", " : "";
                                point(busBw, what + "out-of-place", bytes, outOfPlace.busBw);
                                point(busBw, what + "in-place", bytes, inPlace.busBw);
                                point(time, what + "out-of-place", bytes, outOfPlace.timeUs);
                                point(time, what + "in-place", bytes, inPlace.timeUs);
                            }
                        }
                    }
                }
                table.printFooter();
                if (out != null && plot != null) {
                    writePlot(busBw, time);
                }
                if (table.failedMeasurements() > 0) {
                    if (out != null) {
                        System.err.println("allreduce-perf: " + table.failedMeasurements()
                                + " measurement(s) had wrong elements (see #wrong)");
                    }
                    return 1;
                }
                return 0;
            }
        }

        /** Adds a point to the named series, creating it the first time (log axes: values of 0 are left out). */
        private void point(XYSeriesCollection data, String series, long bytes, double value) {
            if (value <= 0) {
                return;
            }
            int index = data.getSeriesIndex(series);
            XYSeries s = index >= 0 ? data.getSeries(index) : new XYSeries(series, false, true);
            if (index < 0) {
                data.addSeries(s);
            }
            s.add(bytes, value);
        }

        private void writePlot(XYSeriesCollection busBw, XYSeriesCollection time) {
            String title = "sparkccl all-reduce, " + comm.size() + " ranks, " + device + ", " + describeSettings();
            try {
                Charts.writePng(Charts.sizeSweep(title, busBw, time), plot);
                out.println("# plot: " + plot);
            } catch (IOException e) {
                throw new java.io.UncheckedIOException("cannot write the plot " + plot + ": " + e.getMessage()
                        + "; check that its folder is writable", e);
            }
        }

        /** As nccl-tests: multiply by -f, or add -i when -f is 1; -1 ends a sweep that could not grow (0 * f). */
        private long next(long size) {
            long n = stepFactor > 1 ? size * stepFactor : size + stepBytes;
            return n > size ? n : -1;
        }

        private void printHeader(String devices) {
            out.printf(Locale.ROOT, "# nThread 1 nGpus %d minBytes %d maxBytes %d step: %d(%s) warmup iters: %d iters: %d "
                            + "agg iters: 1 validation: %d graph: %d%n",
                    comm.size(), minBytes, maxBytes, stepFactor > 1 ? stepFactor : stepBytes,
                    stepFactor > 1 ? "factor" : "bytes", warmupIters, iters, checkIters, graphLaunches);
            out.println("#");
            out.println("# sparkccl allreduce-perf: " + comm.size() + " rank(s) as processes of this host, device " + device + ", "
                    + describeSettings() + (graphLaunches > 0 ? ", timed calls captured in a CUDA graph, replayed " + graphLaunches
                    + " times (-G " + graphLaunches + ")" : blocking == 0 ? ", timed calls queued on a stream (-z 0)"
                    : ", blocking calls"));
            out.println("#");
            out.println("# Using devices");
            out.print(devices);
        }

        private String describeSettings() {
            Params p = params();
            return "transport " + transport + " (engine " + comm.getClass().getSimpleName()
                    + (pretendHosts > 0 ? ", " + pretendHosts + " pretend hosts" : "")
                    + (comm.getClass().getSimpleName().startsWith("Host") ? "" : ", " + p.get(Params.SOCKET_CONNECTIONS)
                    + " TCP connection(s) per neighbour") + "), proto " + p.get(Params.PROTO) + ", channels "
                    + (p.get(Params.NCHANNELS) > 0 ? p.get(Params.NCHANNELS) : 1)
                    + (register == 1 ? ", buffers shared (-R 1)" : "");
        }

        /** nccl-tests warms up at the largest and the smallest size: the JIT needs it even more than CUDA. */
        private void warmUp(DataType type, ReduceOp reduceOp) {
            ReferenceCheck data = new ReferenceCheck(type, reduceOp, comm.size(), ReferenceCheck.seed(SEED, "warmup"));
            for (long size : new long[] {maxBytes, minBytes}) {
                long count = size / type.size();
                memory.fill(data, comm.rank(), send, count);
                for (int i = 0; i < warmupIters; i++) {
                    comm.allReduce(send, recv, count, type, reduceOp);
                }
            }
        }

        /**
         * --first-calls: the first N calls of the smallest size, out of place, right after the
         * communicator was built and before any warm-up, timed one by one; rank 0 prints the slowest
         * rank's first three calls and means of calls 1-10, 11-100 and 101-N, and the result is checked.
         */
        private void firstCalls(DataType type, ReduceOp reduceOp) {
            long count = Math.max(1, minBytes / type.size());
            ReferenceCheck check = new ReferenceCheck(type, reduceOp, comm.size(), ReferenceCheck.seed(SEED, "first"));
            memory.fill(check, comm.rank(), send, count);
            long[] callNs = new long[firstCalls];
            // Every rank starts the first call together (the bootstrap's barrier, not a collective, which
            // would warm the path up): the first call's time is then its own, not a late peer's.
            bootstrapBarrier.run();
            for (int i = 0; i < firstCalls; i++) {
                long t0 = System.nanoTime();
                comm.allReduce(send, recv, count, type, reduceOp);
                callNs[i] = System.nanoTime() - t0;
            }
            long wrong = memory.check(check, recv, count).wrong();
            int[][] ranges = {{0, 1}, {1, 2}, {2, 3}, {0, 10}, {10, 100}, {100, firstCalls}};
            StringBuilder line = new StringBuilder(String.format(Locale.ROOT,
                    "# first %d calls at %d B (out of place, before any warm-up; slowest rank, us):", firstCalls,
                    count * type.size()));
            for (int[] r : ranges) {
                int to = Math.min(r[1], firstCalls);
                if (r[0] >= to) {
                    continue;
                }
                double sum = 0;
                for (int i = r[0]; i < to; i++) {
                    sum += callNs[i];
                }
                double meanUs = sum / (to - r[0]) / 1e3;
                double slowest = Double.longBitsToDouble(memory.allReduceBits(comm, Double.doubleToRawLongBits(meanUs),
                        DataType.FLOAT64, ReduceOp.MAX));
                line.append(String.format(Locale.ROOT, to - r[0] == 1 ? " call %d %.1f;" : " calls %d-%d mean %.2f;",
                        to - r[0] == 1 ? new Object[] {r[0] + 1, slowest} : new Object[] {r[0] + 1, to, slowest}));
            }
            // Medians too: on a shared machine one stall of milliseconds moves a mean of 100 calls by tens of us.
            for (int to : new int[] {10, 100}) {
                if (firstCalls >= to) {
                    long[] part = java.util.Arrays.copyOf(callNs, to);
                    java.util.Arrays.sort(part);
                    double medianUs = (part[to / 2 - 1] + part[to / 2]) / 2e3;
                    double slowest = Double.longBitsToDouble(memory.allReduceBits(comm,
                            Double.doubleToRawLongBits(medianUs), DataType.FLOAT64, ReduceOp.MAX));
                    line.append(String.format(Locale.ROOT, " calls 1-%d median %.2f;", to, slowest));
                }
            }
            if (firstCalls >= 100) {
                double sum = 0;
                for (int i = 0; i < 100; i++) {
                    sum += callNs[i];
                }
                double slowest = Double.longBitsToDouble(memory.allReduceBits(comm,
                        Double.doubleToRawLongBits(sum / 100 / 1e3), DataType.FLOAT64, ReduceOp.MAX));
                line.append(String.format(Locale.ROOT, " calls 1-100 mean %.2f;", slowest));
            }
            long wrongTotal = memory.allReduceBits(comm, wrong, DataType.INT64, ReduceOp.SUM);
            double build = Double.longBitsToDouble(memory.allReduceBits(comm, Double.doubleToRawLongBits(buildMs),
                    DataType.FLOAT64, ReduceOp.MAX));
            if (out != null) {
                out.println(line.append(String.format(Locale.ROOT, " communicator built in %.1f ms; #wrong ", build))
                        .append(wrongTotal));
            }
            if (wrongTotal != 0) {
                throw new CclException("--first-calls: " + wrongTotal + " wrong elements");
            }
        }

        /**
         * The JVM runs a loop interpreted until it has run hot (thousands of passes): a few nccl-tests
         * warm-up calls leave small sizes timing the interpreter. So, once per sweep, every rank makes
         * the same fixed number of small (one-shot), mid-size and large calls before anything is timed.
         */
        private void warmUpJit(DataType type, ReduceOp reduceOp) {
            if (comm.memoryKind() != org.sparkccl.core.MemoryKind.HOST) {
                return; // the device does the work; the host side warms up in the -w calls
            }
            // Formatting a double loads a ThreadLocal subclass (FormattedFloatingDecimal's buffer),
            // and loading one throws away every compiled method that inlined ThreadLocal.get - the
            // reductions' per-thread blocks among them. Rank 0 formats its first row right after
            // it: seen deoptimizing ThreadLocal.get there (PrintCompilation, class-load log). So
            // every rank formats one first, before anything is compiled.
            String.format(Locale.ROOT, "%.2f", 0.5);
            long small = Math.max(1, Math.min(maxBytes, 4096) / type.size());
            long smallest = Math.max(1, Math.min(small, minBytes / type.size()));
            long mid = Math.max(1, Math.min(maxBytes, 128L << 10) / type.size());
            long large = Math.max(1, Math.min(maxBytes, 1L << 20) / type.size());
            // In place and out of place alternate, and so do 4 KB and the sweep's smallest size: a
            // path the JIT has not seen (send == recv, a count below one block) would otherwise
            // deoptimize inside the first timed rows, and with C2 alone run interpreted until the
            // method is hot again (seen: the first row, 1 KB, at twice the 2 KB row's median).
            long[] oneCall = new long[1];
            for (int i = 0; i < JIT_WARMUP_SMALL_CALLS; i++) {
                timedCalls(i % 2 == 0 ? send : recv, (i & 2) == 0 ? small : smallest, type, reduceOp, 1, oneCall);
                if (i % 16 == 15) {
                    // The calls each row ends with (the slowest rank's time, the wrong count): other
                    // types and ops in the same call path. Unseen while C2 compiled the path, the first
                    // of them deoptimized it after the first row (PrintCompilation: ShmCommunicator
                    // .allReduce "made not entrant"), and C2 alone recompiled it 10 000 calls into the
                    // next row, taking a core for milliseconds there.
                    memory.allReduceBits(comm, Double.doubleToRawLongBits(i), DataType.FLOAT64, ReduceOp.MAX);
                    memory.allReduceBits(comm, i, DataType.INT64, ReduceOp.SUM);
                    // And the barrier before every timed loop: it runs the ring with a type of its
                    // own. Left out, the first barrier came right before the first timed row and
                    // deoptimized Reduction.reduce (class-load log + PrintCompilation), which then
                    // ran interpreted into that row until C2 compiled it again.
                    comm.barrier();
                }
                if (i % 10_000 == 9_999) {
                    // A few long waits too (one rank late by more than the 20 ms yield phase), so that
                    // the wait loop's yield and park branches are in the profile; the barriers around
                    // every row would otherwise take them first, after compilation.
                    if (comm.rank() == (i / 10_000) % comm.size()) {
                        sleepMillis(25);
                    }
                    comm.allReduce(send, recv, small, type, reduceOp);
                }
            }
            for (int i = 0; i < JIT_WARMUP_MID_CALLS; i++) {
                comm.allReduce(i % 2 == 0 ? send : recv, recv, mid, type, reduceOp);
            }
            for (int i = 0; i < JIT_WARMUP_LARGE_CALLS; i++) {
                comm.allReduce(i % 2 == 0 ? send : recv, recv, large, type, reduceOp);
            }
        }

        /**
         * The timed loop, in a method of its own that the JIT warm-up calls too: inside measure() it
         * was compiled on stack (OSR) in the middle of each row's loop, and recompiled when the next
         * row entered it another way (PrintCompilation: measure @ 240, made not entrant, compiled again).
         * Each call's time goes to {@code callNs} (the clock reads cost tens of nanoseconds, alike in
         * every row); returns their sum. With --rewrite-input the input is first written again from
         * {@link #saved} (untimed), so each call starts with it in this rank's cache, modified, as after
         * a training step's backward pass; without, the calls run back to back and the sum is the loop's
         * wall time.
         */
        private long timedCalls(long src, long count, DataType type, ReduceOp reduceOp, int calls, long[] callNs) {
            if (queued != null && graphLaunches > 0) {
                // -G N: the calls captured once (untimed), the graph replayed N times, one wait; each call is
                // credited the mean, and the row's time is that of one replay.
                long total = queued.graphed(() -> {
                    for (int i = 0; i < calls; i++) {
                        queued.allReduce(src, recv, count, type, reduceOp);
                    }
                }, graphLaunches, comm::barrier);
                java.util.Arrays.fill(callNs, 0, calls, total / ((long) calls * graphLaunches));
                return total / graphLaunches;
            }
            if (queued != null) {
                // -z 0: one wait for the whole row; each call is credited the mean.
                long t0 = System.nanoTime();
                for (int i = 0; i < calls; i++) {
                    queued.allReduce(src, recv, count, type, reduceOp);
                }
                queued.synchronize();
                long total = System.nanoTime() - t0;
                java.util.Arrays.fill(callNs, 0, calls, total / calls);
                return total;
            }
            long bytes = count * type.size();
            long total = 0;
            long last = System.nanoTime();
            for (int i = 0; i < calls; i++) {
                if (rewriteInput) {
                    UnsafeApi.copyMemory(saved, src, bytes);
                    last = System.nanoTime();
                }
                comm.allReduce(src, recv, count, type, reduceOp);
                long now = System.nanoTime();
                callNs[i] = now - last;
                total += callNs[i];
                last = now;
            }
            return total;
        }

        private PerfTable.Measurement measure(DataType type, ReduceOp reduceOp, long count, boolean inPlace) {
            long src = inPlace ? recv : send;
            int n = comm.size();
            memory.fill(new ReferenceCheck(type, reduceOp, n, ReferenceCheck.seed(SEED, type, reduceOp, count, inPlace, "timed")),
                    comm.rank(), src, count);
            // Collect the previous row's garbage (checks, fills) now, on every rank before the
            // barrier: a young collection inside the timed loop stalls one rank for 10-50 ms (seen
            // with JFR) and the others wait, which for a few-microsecond call is the whole average.
            System.gc();
            // Untimed calls of this very size first, as our OpenMPI benchmark does (-w per size) and
            // nccl-tests does with its one synchronizing call: the first calls after the fill pull
            // every written line from the writer's cache and meet the row's first JIT work.
            for (int i = 0; i < warmupIters; i++) {
                comm.allReduce(src, recv, count, type, reduceOp);
            }
            long jitWaitMs = JitQuiet.await();
            comm.barrier();
            long[] callNs = new long[iters];
            if (rewriteInput) {
                UnsafeApi.copyMemory(src, saved, count * type.size());
            }
            double timeUs = timedCalls(src, count, type, reduceOp, iters, callNs) / 1e3 / iters;
            if (rewriteInput) {
                UnsafeApi.copyMemory(saved, src, count * type.size());
            }
            if (callStats) {
                System.err.println(CallStats.describe(comm.rank(), count * type.size(), inPlace, callNs)
                        + (jitWaitMs < 0 ? "; JIT still compiling after " + -jitWaitMs + " ms" : "; JIT quiet after " + jitWaitMs + " ms"));
            }
            long wrong = 0;
            for (int c = 0; c < checkIters; c++) {
                ReferenceCheck check = new ReferenceCheck(type, reduceOp, n,
                        ReferenceCheck.seed(SEED, type, reduceOp, count, inPlace, c));
                memory.fill(check, comm.rank(), src, count);
                comm.allReduce(src, recv, count, type, reduceOp);
                ReferenceCheck.Result result = memory.check(check, recv, count);
                if (result.wrong() > 0) {
                    System.err.println("rank " + comm.rank() + ": " + (inPlace ? "in-place " : "out-of-place ") + result);
                }
                wrong += result.wrong();
            }
            long slowest = memory.allReduceBits(comm, Double.doubleToRawLongBits(timeUs), DataType.FLOAT64, ReduceOp.MAX);
            long wrongTotal = checkIters == 0 ? -1 : memory.allReduceBits(comm, wrong, DataType.INT64, ReduceOp.SUM);
            return new PerfTable.Measurement(Double.longBitsToDouble(slowest), count * type.size(), n, wrongTotal);
        }
    }

    private List<DataType> types() {
        if (datatype.equalsIgnoreCase("all")) {
            return List.of(DataType.values());
        }
        try {
            return List.of(DataType.fromName(datatype));
        } catch (IllegalArgumentException e) {
            throw bad(e.getMessage());
        }
    }

    private List<ReduceOp> ops() {
        if (op.equalsIgnoreCase("all")) {
            return List.of(ReduceOp.values());
        }
        try {
            return List.of(ReduceOp.fromName(op));
        } catch (IllegalArgumentException e) {
            throw bad(e.getMessage());
        }
    }

    /** The warm-up's calls with --rewrite-input start from these bytes: zeros, not whatever malloc left. */
    private static HostStagingBuffer zeroed(HostStagingBuffer buffer) {
        UnsafeApi.setMemory(buffer.address(), buffer.size(), (byte) 0);
        return buffer;
    }

    private static void sleepMillis(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private ParameterException bad(String message) {
        return new ParameterException(spec.commandLine(), message);
    }

    private static PrintStream nullStream() {
        return new PrintStream(java.io.OutputStream.nullOutputStream());
    }

    /** Sizes as nccl-tests takes them: bytes, or with a K, M or G suffix (also GpuAllReduceBench's). */
    public static final class SizeConverter implements CommandLine.ITypeConverter<Long> {
        @Override
        public Long convert(String value) {
            try {
                return Params.parseSize(value);
            } catch (NumberFormatException e) {
                throw new CommandLine.TypeConversionException("'" + value + "' is not a size (e.g. 1024, 64K, 16M, 1G)");
            }
        }
    }
}
