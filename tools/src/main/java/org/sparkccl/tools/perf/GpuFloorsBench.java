package org.sparkccl.tools.perf;

import com.sun.jna.Native;
import java.lang.reflect.Field;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.concurrent.CyclicBarrier;
import jcuda.NativePointerObject;
import jcuda.Pointer;
import jcuda.driver.CUfunction;
import jcuda.driver.CUdeviceptr;
import jcuda.driver.CUstream;
import jcuda.driver.CUstreamWaitValue_flags;
import jcuda.driver.JCudaDriver;
import org.agrona.BufferUtil;
import org.agrona.concurrent.UnsafeBuffer;
import org.sparkccl.core.jdk.JdkAccess;
import org.sparkccl.ipc.cuda.Cuda;
import org.sparkccl.ipc.cuda.CudaDevice;
import org.sparkccl.ipc.cuda.CudaGraph;
import org.sparkccl.ipc.cuda.CudaStream;
import org.sparkccl.ipc.cuda.DeviceBuffer;
import org.sparkccl.ipc.cuda.GpuSupport;
import org.sparkccl.ipc.cuda.KernelModule;
import org.sparkccl.ipc.cuda.PinnedHostBuffer;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * The floors a small GPU collective builds on, measured in the run that measures the collective
 * (issue 25), one line each ({@code FLOOR name median mean}, microseconds):
 * <ol>
 *   <li>a null kernel launched from Java and synchronized: through JCuda (what the engine uses), and
 *       through JNA's direct mapping of {@code cuLaunchKernel} (what JCuda's JNI side costs beside the
 *       driver's own call: on the H200 machine JNA was no faster); queued back to back (the launch call
 *       alone); from two threads at once (ranks as threads); a done word in mapped host memory spun on
 *       instead of {@code cuStreamSynchronize};</li>
 *   <li>(the PyTorch cross-check is scripts/gpu_floors.py, run beside this);</li>
 *   <li>host -> GPU -> host through mapped pinned memory to a kernel that is already running;</li>
 *   <li>a flag round trip between two blocks through global memory (GPU scope, and system scope);</li>
 * </ol>
 * and CUDA graphs: one graph of one null kernel launched and synchronized, and launched alone back to
 * back (the host's cost of a replay against a launch's), and the time per kernel inside a graph of 50
 * (the GPU's own back-to-back kernel floor).
 *
 * <pre>
 *   GpuFloorsBench [-n 2000] [-w 500] [--device 0]
 * </pre>
 */
@Command(name = "GpuFloorsBench", mixinStandardHelpOptions = true,
        description = "the launch, doorbell and flag floors of one GPU, in microseconds")
public final class GpuFloorsBench implements Callable<Integer> {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    static final String RESOURCE = "/org/sparkccl/tools/perf/sparkccl_floors.fatbin";
    private static final long STOP = -1L;
    private static final int GRAPH_KERNELS = 50;

    @Option(names = "-n", defaultValue = "2000", description = "timed repetitions per floor")
    private int iters;

    @Option(names = "-w", defaultValue = "500", description = "untimed repetitions per floor")
    private int warmup;

    @Option(names = "--device", defaultValue = "0", description = "GPU ordinal")
    private int ordinal;

    public static void main(String[] args) {
        System.exit(new CommandLine(new GpuFloorsBench()).execute(args));
    }

    @Override
    public Integer call() throws Exception {
        String reason = GpuSupport.unavailableReason();
        if (reason != null) {
            System.err.println("GPUs cannot be used here: " + reason);
            return 2;
        }
        CudaDevice device = CudaDevice.get(ordinal);
        device.makeCurrent();
        KernelModule module = KernelModule.forDevice(device, RESOURCE);
        System.out.printf(Locale.ROOT, "# GPU floors on %s (%s), %d timed after %d untimed; median and mean, us%n",
                device.where(), device.name(), iters, warmup);
        try (CudaStream stream = new CudaStream(device, "floors");
             CudaStream second = new CudaStream(device, "floors 2");
             PinnedHostBuffer host = PinnedHostBuffer.allocate(device, 4096, "floors");
             DeviceBuffer flags = DeviceBuffer.allocate(device, 4096, "floors")) {
            UnsafeBuffer words = new UnsafeBuffer(host.address(), 4096);
            words.setMemory(0, 4096, (byte) 0);
            Kernel nullKernel = new Kernel(module.function("floor_null"), 0);
            Kernel doneKernel = new Kernel(module.function("floor_null_done"), 2);
            doneKernel.args.putLong(0, host.devicePointer());

            // The host's clock, which every blocking call reads a few times (GpuLauncher's breakdown): where the
            // clock source is not the TSC, each read is a system call.
            long[] sink = {0};
            report("host clock: System.nanoTime(), per read (100 a sample)", perItem(time(() -> {
                for (int i = 0; i < 100; i++) {
                    sink[0] += System.nanoTime();
                }
            }), 100));

            // (i) a null kernel, launched and synchronized.
            report("(i) null kernel, JCuda cuLaunchKernel + cuStreamSynchronize",
                    time(() -> {
                        nullKernel.launchJcuda(stream);
                        stream.synchronize();
                    }));
            report("(i) null kernel, JNA cuLaunchKernel + cuStreamSynchronize",
                    time(() -> {
                        nullKernel.launchDirect(stream);
                        Direct.check(Direct.Lib.cuStreamSynchronize(Direct.handle(stream.handle())), "cuStreamSynchronize");
                    }));
            long[] value = {0};
            report("(i) null kernel, JNA cuLaunchKernel + spin on a done word in mapped host memory",
                    time(() -> {
                        long v = ++value[0];
                        doneKernel.args.putLong(8, v);
                        doneKernel.launchDirect(stream);
                        while (words.getLongVolatile(0) != v) {
                            Thread.onSpinWait();
                        }
                    }));
            report("(i) JCuda cuLaunchKernel alone, queued back to back", timeQueued(() -> nullKernel.launchJcuda(stream), stream));
            report("(i) JNA cuLaunchKernel alone, queued back to back", timeQueued(() -> nullKernel.launchDirect(stream), stream));
            report("(i) JNA cuLaunchKernel + cuStreamSynchronize, 2 threads at once (own streams), per call",
                    timeTwoThreads(device, nullKernel, stream, second));

            // Graphs: one null kernel, and the per-kernel time inside a graph of 50.
            try (CudaGraph one = CudaGraph.capture(stream, () -> nullKernel.launchJcuda(stream), "floors");
                 CudaGraph fifty = CudaGraph.capture(stream, () -> {
                     for (int i = 0; i < GRAPH_KERNELS; i++) {
                         nullKernel.launchJcuda(stream);
                     }
                 }, "floors")) {
                report("graph of 1 null kernel, cuGraphLaunch + cuStreamSynchronize", time(() -> {
                    one.launch(stream);
                    stream.synchronize();
                }));
                // What a stream-ordered call costs the host when it launches a graph instead of a kernel
                // (SPARKCCL_STREAM_LAUNCH=graph, GraphLaunch): beside "cuLaunchKernel alone" above.
                report("graph of 1 null kernel, cuGraphLaunch alone, queued back to back", timeQueued(() -> one.launch(stream),
                        stream));
                report("graph of " + GRAPH_KERNELS + " null kernels, per kernel (GPU back-to-back kernel floor)", perItem(time(() -> {
                    fifty.launch(stream);
                    stream.synchronize();
                }), GRAPH_KERNELS));
            }

            // (iii) host -> GPU -> host to a kernel that is already running.
            Kernel echo = new Kernel(module.function("floor_echo"), 3);
            echo.args.putLong(0, host.devicePointer() + 64);
            echo.args.putLong(8, host.devicePointer() + 128);
            echo.args.putLong(16, 5_000_000_000L);
            words.putLongVolatile(64, 0);
            words.putLongVolatile(128, 0);
            echo.launchDirect(stream);
            long[] seq = {0};
            report("(iii) host -> running kernel -> host through mapped pinned memory (doorbell round trip)",
                    time(() -> {
                        long s = ++seq[0];
                        words.putLongRelease(64, s);
                        while (words.getLongVolatile(128) != s) {
                            Thread.onSpinWait();
                        }
                    }));
            words.putLongRelease(64, STOP);
            stream.synchronize();

            // (v) Stream memory operations: what a stream-ordered call would cost that rings a kernel which is
            // already running (cuStreamWriteValue32 on the caller's stream) and holds the stream until its
            // answer (cuStreamWaitValue32), instead of launching a kernel per call.
            try {
                streamMemOpFloors(echo, words, host, flags, stream);
            } catch (RuntimeException e) {
                System.out.println("FLOOR (v) stream memory operations: not available here: " + e.getMessage());
            }

            // (iv) two blocks, one flag each way, through global memory.
            Kernel pingpong = new Kernel(module.function("floor_pingpong"), 4);
            long rounds = 20_000;
            for (int gpuScope = 1; gpuScope >= 0; gpuScope--) {
                double[] samples = new double[20];
                for (int i = -2; i < samples.length; i++) {
                    DeviceBuffer.fill(flags.address(), 4096, (byte) 0, stream, "floors");
                    pingpong.args.putLong(0, flags.address());
                    pingpong.args.putLong(8, rounds);
                    pingpong.args.putLong(16, flags.address() + 2048);
                    pingpong.args.putInt(24, gpuScope);
                    pingpong.launchDirect(stream, 2, 32);
                    stream.synchronize();
                    long[] ns = new long[1];
                    Cuda.check(JCudaDriver.cuMemcpyDtoH(Pointer.to(ns), Cuda.devicePointer(flags.address() + 2048), 8),
                            "cuMemcpyDtoH", "floors");
                    if (i >= 0) {
                        samples[i] = ns[0] / 1e3 / rounds;
                    }
                }
                report("(iv) flag round trip between two blocks, global memory, " + (gpuScope == 1 ? "gpu" : "sys")
                        + "-scope loads and stores (" + rounds + " rounds a sample)", samples);
            }
        }
        return 0;
    }

    private void streamMemOpFloors(Kernel echo, UnsafeBuffer words, PinnedHostBuffer host, DeviceBuffer flags,
                                   CudaStream stream) {
        CUstream cs = stream.handle();
        CUdeviceptr word = Cuda.devicePointer(flags.address() + 1024);
        int[] v = {0};
        report("(v) cuStreamWriteValue32 alone, queued back to back", timeQueued(() -> Direct.check(
                JCudaDriver.cuStreamWriteValue32(cs, word, ++v[0], 0), "cuStreamWriteValue32"), stream));
        report("(v) cuStreamWaitValue32 (already true) alone, queued back to back", timeQueued(() -> Direct.check(
                JCudaDriver.cuStreamWaitValue32(cs, word, 0, CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_GEQ),
                "cuStreamWaitValue32"), stream));
        // The echo kernel polls a word in device memory; the stream writes the call's number there and waits
        // until the kernel has answered it, call after call.
        long bell = flags.address() + 2048 + 256;
        long reply = flags.address() + 2048 + 512;
        DeviceBuffer.fill(bell, 8, (byte) 0, stream, "floors");
        DeviceBuffer.fill(reply, 8, (byte) 0, stream, "floors");
        stream.synchronize();
        try (CudaStream echoStream = new CudaStream(stream.device(), "floors echo")) {
            echo.args.putLong(0, bell);
            echo.args.putLong(8, reply);
            echo.launchDirect(echoStream);
            CUdeviceptr bellPtr = Cuda.devicePointer(bell);
            CUdeviceptr replyPtr = Cuda.devicePointer(reply);
            int[] seq = {0};
            report("(v) stream-ordered doorbell: cuStreamWriteValue32 to a running kernel + cuStreamWaitValue32 for"
                    + " its answer, queued back to back, per call", timeQueued(() -> {
                        int s = ++seq[0];
                        Direct.check(JCudaDriver.cuStreamWriteValue32(cs, bellPtr, s, 0), "cuStreamWriteValue32");
                        Direct.check(JCudaDriver.cuStreamWaitValue32(cs, replyPtr, s,
                                CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_GEQ), "cuStreamWaitValue32");
                    }, stream, true));
            Cuda.check(JCudaDriver.cuMemsetD32(bellPtr, (int) STOP, 2), "cuMemsetD32", "floors");
            echoStream.synchronize();
        }
    }

    /** Samples of {@code items} things each, as the time of one. */
    private static double[] perItem(double[] samples, int items) {
        for (int i = 0; i < samples.length; i++) {
            samples[i] /= items;
        }
        return samples;
    }

    private double[] time(Runnable once) {
        for (int i = 0; i < warmup; i++) {
            once.run();
        }
        double[] us = new double[iters];
        for (int i = 0; i < iters; i++) {
            long t0 = System.nanoTime();
            once.run();
            us[i] = (System.nanoTime() - t0) / 1e3;
        }
        return us;
    }

    /** Batches of 50 calls queued without a wait, then one synchronize: time per call of each batch. */
    private double[] timeQueued(Runnable launch, CudaStream stream) {
        return timeQueued(launch, stream, false);
    }

    /**
     * Batches of 50 calls queued back to back, then one synchronize; each batch's time per call, up to
     * the last call queued (the host's cost) or, with {@code untilDone}, up to its work being done.
     */
    private double[] timeQueued(Runnable launch, CudaStream stream, boolean untilDone) {
        int batch = 50;
        double[] us = new double[Math.max(1, iters / batch)];
        for (int i = -Math.max(1, warmup / batch); i < us.length; i++) {
            long t0 = System.nanoTime();
            for (int k = 0; k < batch; k++) {
                launch.run();
            }
            long t1 = System.nanoTime();
            stream.synchronize();
            if (i >= 0) {
                us[i] = ((untilDone ? System.nanoTime() : t1) - t0) / 1e3 / batch;
            }
        }
        return us;
    }

    private double[] timeTwoThreads(CudaDevice device, Kernel kernel, CudaStream a, CudaStream b) throws Exception {
        double[][] results = new double[2][];
        CyclicBarrier start = new CyclicBarrier(2);
        Thread[] threads = new Thread[2];
        Throwable[] failed = new Throwable[1];
        for (int t = 0; t < 2; t++) {
            final int me = t;
            final CudaStream s = t == 0 ? a : b;
            threads[t] = new Thread(() -> {
                try {
                    device.makeCurrent();
                    start.await();
                    results[me] = time(() -> {
                        kernel.launchDirect(s);
                        Direct.check(Direct.Lib.cuStreamSynchronize(Direct.handle(s.handle())), "cuStreamSynchronize");
                    });
                } catch (Throwable e) {
                    failed[0] = e;
                }
            }, "floors-" + t);
            threads[t].start();
        }
        for (Thread t : threads) {
            t.join();
        }
        if (failed[0] != null) {
            throw new IllegalStateException(failed[0]);
        }
        double[] both = Arrays.copyOf(results[0], results[0].length + results[1].length);
        System.arraycopy(results[1], 0, both, results[0].length, results[1].length);
        return both;
    }

    private static void report(String name, double[] us) {
        double[] s = us.clone();
        Arrays.sort(s);
        double mean = Arrays.stream(s).average().orElse(0);
        System.out.printf(Locale.ROOT, "FLOOR %-100s median %8.2f  mean %8.2f  p10 %8.2f  p90 %8.2f%n", name,
                s[s.length / 2], mean, s[s.length / 10], s[s.length * 9 / 10]);
    }

    /** A kernel with its parameters prepared once: up to 4 eight-byte arguments in a direct buffer. */
    private static final class Kernel {
        final CUfunction function;
        final long functionHandle;
        final ByteBuffer args = ByteBuffer.allocateDirect(32).order(ByteOrder.LITTLE_ENDIAN);
        final ByteBuffer pointers = ByteBuffer.allocateDirect(32).order(ByteOrder.LITTLE_ENDIAN);
        final Pointer jcudaParams;
        final long directParams;

        Kernel(CUfunction function, int nargs) {
            this.function = function;
            this.functionHandle = Direct.handle(function);
            Pointer[] each = new Pointer[Math.max(1, nargs)];
            for (int i = 0; i < nargs; i++) {
                pointers.putLong(8 * i, BufferUtil.address(args) + 8L * i);
                each[i] = Pointer.to(args).withByteOffset(8L * i);
            }
            this.jcudaParams = nargs == 0 ? null : Pointer.to(each);
            this.directParams = nargs == 0 ? 0 : BufferUtil.address(pointers);
        }

        void launchJcuda(CudaStream stream) {
            Cuda.check(JCudaDriver.cuLaunchKernel(function, 1, 1, 1, 32, 1, 1, 0, stream.handle(), jcudaParams, null),
                    "cuLaunchKernel", "floors");
        }

        void launchDirect(CudaStream stream) {
            launchDirect(stream, 1, 32);
        }

        void launchDirect(CudaStream stream, int blocks, int threads) {
            Direct.check(Direct.Lib.cuLaunchKernel(functionHandle, blocks, 1, 1, threads, 1, 1, 0,
                    Direct.handle(stream.handle()), directParams, 0), "cuLaunchKernel");
        }
    }

    /** cuLaunchKernel and cuStreamSynchronize bound straight to libcuda through JNA's direct mapping. */
    static final class Direct {
        private static final Field NATIVE_POINTER;

        static {
            try {
                NATIVE_POINTER = NativePointerObject.class.getDeclaredField("nativePointer");
                NATIVE_POINTER.setAccessible(true);
            } catch (ReflectiveOperationException e) {
                throw new IllegalStateException(e);
            }
        }

        static long handle(NativePointerObject o) {
            try {
                return NATIVE_POINTER.getLong(o);
            } catch (IllegalAccessException e) {
                throw new IllegalStateException(e);
            }
        }

        static void check(int rc, String call) {
            if (rc != 0) {
                throw new IllegalStateException(call + " failed: " + Cuda.errorName(rc));
            }
        }

        static final class Lib {
            static {
                Native.register(Lib.class, "libcuda.so.1");
            }

            static native int cuLaunchKernel(long f, int gx, int gy, int gz, int bx, int by, int bz, int sharedBytes,
                                             long stream, long params, long extra);

            static native int cuStreamSynchronize(long stream);
        }
    }
}
