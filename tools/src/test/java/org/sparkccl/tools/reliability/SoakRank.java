package org.sparkccl.tools.reliability;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.zip.CRC32C;
import org.agrona.BufferUtil;
import org.agrona.UnsafeApi;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.DataType;
import org.sparkccl.core.memory.HostStagingBuffer;
import org.sparkccl.core.jdk.JdkAccess;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.SharedBuffer;
import org.sparkccl.core.bootstrap.TcpBootstrap;
import org.sparkccl.core.check.ReferenceCheck;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.engine.Engines;
import org.sparkccl.ipc.cuda.CudaDevice;
import org.sparkccl.ipc.cuda.DeviceBuffer;
import org.sparkccl.ipc.cuda.GpuSupport;
import org.sparkccl.ipc.cuda.PinnedHostBuffer;
import org.sparkccl.ipc.gpu.GpuCommunicator;
import org.sparkccl.ipc.gpu.GpuCommunicators;
import org.sparkccl.tools.launch.LaunchedRank;
import org.sparkccl.core.shm.ShmTransport;

/**
 * One rank of {@link SoakTest} and {@link GpuSoakTest}: {@code SoakRank host|gpu SEED CALLS SAMPLE_EVERY}.
 * Runs CALLS collectives of random kind, size, type, op and communicator, the same sequence on every
 * rank (drawn from SEED), and checks each result against the float64 reference. Host: auto, ring
 * LL, ring Simple, one-shot, and direct on shared buffers, over SHM. GPU: auto, ring LL, ring Simple,
 * one-shot, and ring LL128 where every rank runs on one GPU, over CUDA IPC, on this rank's GPU
 * (rank modulo the GPUs visible). It prints:
 * <ul>
 *   <li>{@code SAMPLE <calls> fds <n> mappings <n> threads <n> new since the first: [..]} every
 *       SAMPLE_EVERY calls;</li>
 *   <li>{@code DIGEST <crc>}: CRC32C of every result byte (reduce-scatters aside: their blocks differ by
 *       design), equal on every rank when the results are;</li>
 *   <li>{@code LEFT <staging bytes> <mapped shm bytes>} after closing everything: both must be 0
 *       (GPU: {@code <device buffer bytes> <pinned host bytes>});</li>
 *   <li>GPU only (two rounds of CALLS / 2, each making and closing every communicator):
 *       {@code GPUSAMPLE <calls> <bytes in use>} every SAMPLE_EVERY calls, {@code GPUROUND <round>
 *       <bytes in use after it closed everything>}, and {@code GPUMEM <bytes in use before> <after>}
 *       (cuMemGetInfo, every process);</li>
 *   <li>{@code WRONG <what>} and exit 1 on the first wrong result.</li>
 * </ul>
 */
public final class SoakRank {
    private static final int MAX_COUNT = 1 << 18;
    private static final String[][] HOST_SETTINGS = {
        {"auto", "auto"}, {"Ring", "LL"}, {"Ring", "Simple"}, {"OneShot", "auto"}, {"Direct", "auto"}};
    private static final String[][] GPU_SETTINGS = {
        {"auto", "auto"}, {"Ring", "LL"}, {"Ring", "Simple"}, {"OneShot", "auto"}, {"Ring", "LL128"}};

    private SoakRank() {
    }

    public static void main(String[] args) throws Exception {
        JdkAccess.ensureAgronaAccess();
        boolean gpu = "gpu".equals(args[0]);
        Random random = new Random(Long.parseLong(args[1]));
        int calls = Integer.parseInt(args[2]);
        int sampleEvery = Integer.parseInt(args[3]);
        LaunchedRank me = LaunchedRank.fromEnvironment();
        CRC32C digest = new CRC32C();
        CudaDevice device = gpu ? CudaDevice.get(me.rank() % GpuSupport.deviceCount()) : null;
        long gpuBytesBefore = 0;
        long gpuBytesAfter = 0;
        try (TcpBootstrap bootstrap = me.bootstrap(Duration.ofMinutes(2))) {
            // Every rank's context exists once they have met: "before" counts every process's.
            gpuBytesBefore = gpu ? device.usedBytes() : 0;
            int n = bootstrap.size();
            int rank = bootstrap.rank();
            long bytes = 8L * MAX_COUNT * n;
            // GPU: two rounds, each making, using and closing every communicator. What CUDA sets up once per
            // process on first use (kernel code, local memory sized for the largest kernel) stays after the
            // first; a leak per communicator shows as growth from the first round's end to the second's.
            // LL128 needs every hop over NVLink or within one GPU: certain only where all ranks share one.
            String[][] settings = !gpu ? HOST_SETTINGS
                    : GpuSupport.deviceCount() == 1 ? GPU_SETTINGS : Arrays.copyOf(GPU_SETTINGS, GPU_SETTINGS.length - 1);
            int rounds = gpu ? 2 : 1;
            int perRound = calls / rounds;
            ProcessResources firstSample = null;
            for (int round = 1; round <= rounds; round++) {
                List<Communicator> comms = new ArrayList<>();
                List<String> names = new ArrayList<>();
                for (String[] s : settings) {
                    Params params = Params.fromEnvironment().withOverrides(Map.of("SPARKCCL_ALGO", s[0], "SPARKCCL_PROTO", s[1]));
                    comms.add(gpu ? GpuCommunicators.create(bootstrap, device.ordinal(), params)
                            : Engines.host(bootstrap, params));
                    names.add(s[0] + "/" + s[1]);
                }
                // Host: plain memory for every communicator but the last (direct), which needs shared buffers.
                ByteBuffer plain = gpu ? null : BufferUtil.allocateDirectAligned((int) (2 * bytes), 64);
                SharedBuffer shared = gpu ? null : comms.get(comms.size() - 1).allocateShared(2 * bytes);
                DeviceBuffer onGpu = gpu ? DeviceBuffer.allocate(device, 2 * bytes, "soak") : null;
                int directIndex = gpu ? -1 : comms.size() - 1;
                byte[] copy = new byte[(int) bytes];
                try (SoakMemory memory = gpu ? SoakMemory.device(onGpu, ((GpuCommunicator) comms.get(0)).stream())
                        : SoakMemory.host()) {
                    for (int call = (round - 1) * perRound + 1; call <= round * perRound; call++) {
                        int which = random.nextInt(comms.size());
                        Communicator comm = comms.get(which);
                        long base = gpu ? onGpu.address() : which == directIndex ? shared.address() : BufferUtil.address(plain);
                        DataType type = DataType.values()[random.nextInt(DataType.values().length)];
                        ReduceOp op = ReduceOp.values()[random.nextInt(ReduceOp.values().length)];
                        // Log-uniform sizes: as many small calls (LL, one-shot) as large ones (Simple, direct).
                        long count = 1 + (long) Math.pow(MAX_COUNT, random.nextDouble());
                        int kind = which == directIndex ? 0 : random.nextInt(4);
                        int root = random.nextInt(n);
                        String what = "call " + call + ": " + names.get(which) + " kind " + kind + " count " + count + " "
                                + type + " " + op + " root " + root + " on rank " + rank;
                        ReferenceCheck check = new ReferenceCheck(type, op, n, call);
                        long send = base;
                        long recv = base + bytes;
                        long inputCount = kind == 1 ? count * n : count;
                        if (kind == 0 && random.nextBoolean()) {
                            recv = send; // allReduce in place half the time
                        }
                        check.fillInput(rank, memory.inputView(send), 0, inputCount);
                        memory.publish(send, inputCount * type.size());
                        long resultBytes = (kind == 2 ? n * count : count) * type.size();
                        ReferenceCheck.Result result;
                        switch (kind) {
                            case 0:
                                comm.allReduce(send, recv, count, type, op);
                                result = check.checkReduced(memory.resultView(recv, resultBytes), 0, count);
                                break;
                            case 1: // reduceScatter: rank r gets the reduction of block r
                                comm.reduceScatter(send, recv, count, type, op);
                                result = check.checkReduced(memory.resultView(recv, resultBytes), rank * count, count);
                                break;
                            case 2: { // allGather: block r is rank r's input
                                comm.allGather(send, recv, count, type);
                                long gathered = memory.resultView(recv, resultBytes);
                                result = new ReferenceCheck.Result(0, null);
                                for (int r = 0; r < n && result.wrong() == 0; r++) {
                                    result = check.checkCopy(r, gathered + r * count * type.size(), 0, count);
                                }
                                break;
                            }
                            default: // broadcast from root
                                comm.broadcast(send, recv, count, type, root);
                                result = check.checkCopy(root, memory.resultView(recv, resultBytes), 0, count);
                                break;
                        }
                        if (result.wrong() != 0) {
                            System.out.println("WRONG " + what + ": " + result);
                            System.out.flush();
                            System.exit(1);
                        }
                        if (kind != 1) { // a reduce-scatter's block differs from rank to rank by design
                            UnsafeApi.copyMemory(null, memory.resultView(recv, resultBytes), copy,
                                    UnsafeApi.arrayBaseOffset(byte[].class), resultBytes);
                            digest.update(copy, 0, (int) resultBytes);
                        }
                        if (call % sampleEvery == 0) {
                            ProcessResources now = ProcessResources.now();
                            firstSample = firstSample == null ? now : firstSample;
                            System.out.println("SAMPLE " + call + " " + now + " new since the first: " + now.newSince(firstSample));
                            if (gpu) {
                                System.out.println("GPUSAMPLE " + call + " " + device.usedBytes());
                            }
                        }
                    }
                }
                if (shared != null) {
                    shared.close();
                }
                if (onGpu != null) {
                    onGpu.close();
                }
                for (Communicator comm : comms) {
                    comm.close();
                }
                // A peer's mapping of this rank's memory can keep it in use until that peer has closed too.
                bootstrap.barrier();
                gpuBytesAfter = gpu ? device.usedBytes() : 0;
                if (gpu) {
                    System.out.println("GPUROUND " + round + " " + gpuBytesAfter);
                }
            }
        }
        System.out.println("DIGEST " + Long.toHexString(digest.getValue()));
        System.out.println(gpu ? "LEFT " + DeviceBuffer.outstandingBytes() + " " + PinnedHostBuffer.outstandingBytes()
                : "LEFT " + HostStagingBuffer.outstandingBytes() + " " + ShmTransport.mappedBytesInJvm());
        if (gpu) {
            System.out.println("GPUMEM " + gpuBytesBefore + " " + gpuBytesAfter);
        }
        System.out.flush();
        System.exit(0);
    }
}
