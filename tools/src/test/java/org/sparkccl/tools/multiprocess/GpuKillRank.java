package org.sparkccl.tools.multiprocess;

import java.io.IOException;
import java.time.Duration;
import java.util.Random;
import org.sparkccl.core.Bootstrap;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.DataType;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.engine.Engines;
import org.sparkccl.ipc.cuda.CudaDevice;
import org.sparkccl.ipc.cuda.DeviceBuffer;
import org.sparkccl.ipc.cuda.GpuSupport;
import org.sparkccl.ipc.cuda.PinnedHostBuffer;
import org.sparkccl.ipc.cuda.ShareableDeviceMemory;
import org.sparkccl.ipc.gpu.GpuCommunicator;
import org.sparkccl.ipc.gpu.GpuCommunicators;
import org.sparkccl.ipc.gpu.GpuTwoLevelCommunicator;
import org.sparkccl.tools.launch.LaunchedRank;

/**
 * One rank of {@link GpuKillTrialsTest}. Every rank all-reduces in a loop, through sizes that take
 * the one-shot, LL and Simple paths, until it fails. The victim (the last rank) SIGKILLs itself from
 * a second thread, after a delay drawn from the trial's seed and counted from the moment the ranks
 * have met (a rank that dies before it ever connects cannot be told from a slow one): in the
 * connect or in a collective, at a point nobody chooses. A survivor prints {@code SURVIVOR <ms>
 * <message>} (from its last successful call, or from the meeting, to its error), closes its
 * communicator and prints
 * {@code GPUMEM <bytes in use before> <after>} and {@code LEFT <bytes of device, shareable, imported and
 * pinned memory still counted>}. Every rank that connected on one host prints {@code LINKS}, how it
 * reaches its peer. Args: {@code seed [counts [pretend-hosts]]}: counts (comma-separated element
 * counts, cycled; empty for the default mix) replace the default mix, e.g. only 16 MB Simple calls;
 * with {@code pretend-hosts}, rank r says it runs on host r / 2 ({@code SPARKCCL_HOST_ID}), the
 * communicator is built through {@link Engines} (two-level across the pretend hosts), and the
 * victim's delay counts from when its communicator is built, so that it dies in a collective.
 */
public final class GpuKillRank {
    private static final long[] DEFAULT_COUNTS = {7, 4099, 262_147, 4_194_307};

    private GpuKillRank() {
    }

    public static void main(String[] args) throws Exception {
        LaunchedRank me = LaunchedRank.fromEnvironment();
        long seed = Long.parseLong(args[0]);
        long[] counts = args.length > 1 && !args[1].isBlank()
                ? java.util.Arrays.stream(args[1].split(",")).mapToLong(Long::parseLong).toArray() : DEFAULT_COUNTS;
        boolean pretendHosts = args.length > 2 && args[2].equals("pretend-hosts");
        boolean victim = me.rank() == me.size() - 1;
        int ordinal = me.rank() % GpuSupport.deviceCount();
        CudaDevice device = CudaDevice.get(ordinal);
        long usedBefore = device.usedBytes();
        long start = System.nanoTime();
        long calls = 0;
        try (Bootstrap bootstrap = me.bootstrap(Duration.ofSeconds(60))) {
            if (victim && !pretendHosts) {
                killItselfLater(new Random(seed).nextInt(2500));
            }
            start = System.nanoTime();
            Params params = Params.fromEnvironment();
            if (pretendHosts) {
                params = params.withOverrides(java.util.Map.of("SPARKCCL_HOST_ID", "kill-host-" + me.rank() / 2,
                        "SPARKCCL_SOCKET_ADDRESS", "127.0.0.1"));
            }
            try (Communicator comm = pretendHosts ? Engines.gpu(bootstrap, ordinal, params, () -> false)
                    : GpuCommunicators.create(bootstrap, ordinal, params);
                 DeviceBuffer buffer = DeviceBuffer.allocate(device, java.util.Arrays.stream(counts).max().getAsLong() * 4,
                         "kill trial")) {
                if (comm instanceof GpuCommunicator one) {
                    System.out.println("LINKS rank " + me.rank() + ": " + one.describeLinks());
                }
                buffer.fill((byte) 0x3f, comm instanceof GpuTwoLevelCommunicator twoLevel ? twoLevel.stream()
                        : ((GpuCommunicator) comm).stream());
                if (victim && pretendHosts) {
                    killItselfLater(new Random(seed).nextInt(1000));
                }
                while (true) {
                    long count = counts[(int) (calls++ % counts.length)];
                    comm.allReduce(buffer.address(), buffer.address(), count, DataType.FLOAT32, ReduceOp.MAX);
                    start = System.nanoTime();
                }
            }
        } catch (RuntimeException e) {
            System.out.println("SURVIVOR " + (System.nanoTime() - start) / 1_000_000 + " after " + calls + " calls: "
                    + e.getMessage());
        }
        sleep(1000); // the victim's context is torn down by the driver after its death
        System.out.println("GPUMEM " + usedBefore + " " + device.usedBytes());
        System.out.println("LEFT " + (DeviceBuffer.outstandingBytes() + ShareableDeviceMemory.outstandingBytes()
                + ShareableDeviceMemory.importedBytes() + PinnedHostBuffer.outstandingBytes()));
    }

    /** SIGKILL of this process from another thread, after the communicator's bootstrap is up. */
    private static void killItselfLater(long delayMs) {
        Thread killer = new Thread(() -> {
            sleep(delayMs);
            System.out.println("KILL after " + delayMs + " ms");
            System.out.flush();
            try {
                new ProcessBuilder("kill", "-9", Long.toString(ProcessHandle.current().pid())).start().waitFor();
            } catch (IOException | InterruptedException e) {
                Runtime.getRuntime().halt(3);
            }
        }, "killer");
        killer.setDaemon(true);
        killer.start();
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
