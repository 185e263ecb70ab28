package org.sparkccl.ipc.gpu;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.agrona.BufferUtil;
import org.sparkccl.core.Bootstrap;
import org.sparkccl.core.ThreadGroupBootstrap;
import org.sparkccl.core.DataType;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.check.ReferenceCheck;
import org.sparkccl.core.param.Params;
import org.sparkccl.ipc.cuda.DeviceBuffer;
import org.sparkccl.ipc.cuda.GpuSupport;
import org.sparkccl.ipc.launch.LaunchedRank;
import org.sparkccl.ipc.launch.RankLauncher;

/**
 * AllReduce on GPUs, timed from the Java call to its return (each call is synchronous), in
 * nccl-tests' columns: {@code size count type time(us) algbw busbw wrong}, then the mean host time of the
 * launch call and the mean GPU time of the kernel (first block start to last block end). Ranks are processes (one
 * per rank, {@link RankLauncher}) or threads of this JVM ({@code --threads}); rank r uses GPU
 * r mod gpus, so {@code --ranks-per-gpu K} gives K ranks per GPU.
 *
 * <pre>
 *   GpuAllReduceBench [-b 8] [-e 256M] [-f 2] [-g GPUS] [--ranks-per-gpu K] [-n iters] [-w warmup]
 *                     [-d float] [-o sum] [--threads]
 * </pre>
 * SPARKCCL_* settings (PROTO, NCHANNELS, P2P_DISABLE, BUFFSIZE, LL_THRESHOLD) apply.
 */
public final class GpuAllReduceBench {
    private long minBytes = 8;
    private long maxBytes = 256L << 20;
    private int factor = 2;
    private int gpus = -1;
    private int ranksPerGpu = 1;
    private int iters = 20;
    private int warmup = 5;
    private DataType type = DataType.FLOAT32;
    private ReduceOp op = ReduceOp.SUM;
    private boolean threads;
    private final List<String> rawArgs = new ArrayList<>();

    public static void main(String[] args) throws Exception {
        GpuAllReduceBench b = new GpuAllReduceBench();
        b.parse(args);
        System.exit(b.run());
    }

    private void parse(String[] args) {
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (a.equals("--threads")) {
                threads = true;
                continue;
            }
            rawArgs.add(a);
            String v = i + 1 < args.length ? args[i + 1] : null;
            switch (a) {
                case "-b": minBytes = Params.parseSize(v); break;
                case "-e": maxBytes = Params.parseSize(v); break;
                case "-f": factor = Integer.parseInt(v); break;
                case "-g": gpus = Integer.parseInt(v); break;
                case "--ranks-per-gpu": ranksPerGpu = Integer.parseInt(v); break;
                case "-n": iters = Integer.parseInt(v); break;
                case "-w": warmup = Integer.parseInt(v); break;
                case "-d": type = DataType.fromName(v); break;
                case "-o": op = ReduceOp.fromName(v); break;
                default: throw new IllegalArgumentException("unknown option " + a + " (see the class comment)");
            }
            rawArgs.add(v);
            i++;
        }
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
            return RankLauncher.of(ranks, GpuAllReduceBench.class.getName()).args(rawArgs)
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
             DeviceBuffer recv = DeviceBuffer.allocate(comm.device(), Math.max(maxBytes, 64), "bench")) {
            if (print) {
                System.out.printf(Locale.ROOT, "# sparkccl GPU allreduce: %d rank(s), %s, %s%n", comm.size(),
                        threads ? "threads of one JVM" : "one process per rank", comm.describeLinks());
                System.out.printf(Locale.ROOT, "# settings: %s%n", params.describeSet());
                System.out.printf(Locale.ROOT, "%12s %12s %8s %6s %10s %9s %9s %7s %10s %10s%n", "size(B)", "count",
                        "type", "proto", "time(us)", "algbw", "busbw", "wrong", "launch(us)", "kernel(us)");
            }
            // A fresh JVM: the call path is interpreted for its first thousand calls or so.
            for (int i = 0; i < 2000; i++) {
                comm.allReduce(send.address(), recv.address(), Math.max(1, Math.min(minBytes, 64 << 10) / type.size()), type, op);
            }
            for (long bytes = minBytes; bytes <= maxBytes; bytes *= factor) {
                long count = Math.max(1, bytes / type.size());
                long size = count * type.size();
                long wrong = check(comm, send, recv, count, size);
                wrongTotal += wrong;
                for (int i = 0; i < warmup; i++) {
                    comm.allReduce(send.address(), recv.address(), count, type, op);
                }
                // The check above leaves large garbage (the reference); a young collection inside the timed
                // loop once stalled a rank for ~50 ms (2 MB: 575 us per call on average instead of 35).
                System.gc();
                bootstrap.barrier();
                long launchNanos = 0;
                long kernelNanos = 0;
                long t0 = System.nanoTime();
                for (int i = 0; i < iters; i++) {
                    comm.allReduce(send.address(), recv.address(), count, type, op);
                    launchNanos += comm.lastLaunchNanos();
                    kernelNanos += comm.lastKernelNanos();
                }
                double us = (System.nanoTime() - t0) / 1e3 / iters;
                double algbw = size / us / 1e3;
                double busbw = algbw * 2.0 * (comm.size() - 1) / comm.size();
                if (print) {
                    System.out.printf(Locale.ROOT, "%12d %12d %8s %6s %10.2f %9.2f %9.2f %7d %10.2f %10.2f%n", size,
                            count, type.ncclName(), comm.algorithmFor(count, type), us, algbw, busbw, wrong,
                            launchNanos / 1e3 / iters, kernelNanos / 1e3 / iters);
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

    /** One checked call: inputs from ReferenceCheck, output compared with the float64 / exact reference. */
    private long check(GpuCommunicator comm, DeviceBuffer send, DeviceBuffer recv, long count, long size) {
        ReferenceCheck check = new ReferenceCheck(type, op, comm.size(), ReferenceCheck.seed(42, count));
        ByteBuffer host = ByteBuffer.allocateDirect((int) size);
        long h = BufferUtil.address(host);
        check.fillInput(comm.rank(), h, 0, count);
        send.copyFromHost(0, h, size, comm.stream());
        recv.fill((byte) 0x7f, comm.stream());
        comm.allReduce(send.address(), recv.address(), count, type, op);
        recv.copyToHost(0, h, size, comm.stream());
        long wrong = check.checkReduced(h, 0, count).wrong();
        java.lang.ref.Reference.reachabilityFence(host);
        // Inputs of the timed calls stay these; their values do not matter for speed.
        return wrong;
    }
}
