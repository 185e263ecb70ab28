package org.sparkccl.ipc.gpu;

import java.util.ArrayList;
import java.util.List;
import org.sparkccl.core.DataType;
import org.sparkccl.core.proto.CollectiveHeader.Kind;
import org.sparkccl.core.proto.Protocol;

/**
 * How one collective runs on the GPUs, the same on every rank: protocol, channels (blocks), and
 * how the buffer is cut. Counts are in the kernel's elements: the data type's for reductions, bytes
 * for AllGather and Broadcast (which run the uint8 kernel, a plain copy).
 *
 * <p>The buffer is {@code n} blocks of {@code blockElems} (the last one clipped to {@code totalElems});
 * channel c carries elements {@code [c * chunkElems, (c + 1) * chunkElems)} of every block, in steps of
 * {@code sliceElems}.
 */
final class GpuPlan {
    final Kind kind;
    final Protocol protocol;
    final int channels;
    final int threads;
    final long blockElems;
    final long totalElems;
    final long chunkElems;
    final long sliceElems;
    final String kernel;
    /** All-reduce in one exchange (oneShotKernel): every rank pushes its input to every peer. */
    final boolean oneShot;

    GpuPlan(Kind kind, Protocol protocol, int channels, int threads, long blockElems, long totalElems,
            long chunkElems, long sliceElems, String kernel) {
        this(kind, protocol, channels, threads, blockElems, totalElems, chunkElems, sliceElems, kernel, false);
    }

    GpuPlan(Kind kind, Protocol protocol, int channels, int threads, long blockElems, long totalElems,
            long chunkElems, long sliceElems, String kernel, boolean oneShot) {
        this.oneShot = oneShot;
        this.kind = kind;
        this.protocol = protocol;
        this.channels = channels;
        this.threads = threads;
        this.blockElems = blockElems;
        this.totalElems = totalElems;
        this.chunkElems = chunkElems;
        this.sliceElems = sliceElems;
        this.kernel = kernel;
    }

    /** A one-shot all-reduce of {@code count} elements over {@code blocks} blocks. */
    static GpuPlan oneShot(long count, DataType type, int blocks, int threads) {
        return new GpuPlan(Kind.ALL_REDUCE, Protocol.LL, blocks, threads, count, count, count, count,
                oneShotKernelName(type), true);
    }

    /** LL, LL128, Simple or 1shot: how the call runs, for benchmarks' columns. */
    String algorithm() {
        return oneShot ? "1shot" : protocol.displayName();
    }

    static String oneShotKernelName(DataType type) {
        return "sccl_oneshot_" + type.ncclName();
    }

    /** Every collective kernel a communicator may launch (ring_kernels.cu). */
    static List<String> allKernelNames() {
        List<String> names = new ArrayList<>();
        for (DataType type : DataType.values()) {
            for (Protocol protocol : Protocol.values()) {
                names.add(kernelName(type, protocol));
            }
            names.add(oneShotKernelName(type));
        }
        names.add(ResidentKernel.KERNEL);
        return names;
    }

    static String kernelName(DataType type, Protocol protocol) {
        return "sccl_ring_" + type.ncclName() + switch (protocol) {
            case LL -> "_ll";
            case LL128 -> "_ll128";
            case SIMPLE -> "_simple";
        };
    }

    @Override
    public String toString() {
        if (oneShot) {
            return kind + " one-shot x" + channels + " blocks (" + kernel + ")";
        }
        return kind + " " + protocol.displayName() + " x" + channels + " ch, block " + blockElems + ", chunk "
                + chunkElems + ", slice " + sliceElems + " (" + kernel + ")";
    }
}
