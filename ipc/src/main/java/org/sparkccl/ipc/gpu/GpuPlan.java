package org.sparkccl.ipc.gpu;

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

    GpuPlan(Kind kind, Protocol protocol, int channels, int threads, long blockElems, long totalElems,
            long chunkElems, long sliceElems, String kernel) {
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

    static String kernelName(DataType type, Protocol protocol) {
        return "sccl_ring_" + type.ncclName() + (protocol == Protocol.LL ? "_ll" : "_simple");
    }

    @Override
    public String toString() {
        return kind + " " + protocol.displayName() + " x" + channels + " ch, block " + blockElems + ", chunk "
                + chunkElems + ", slice " + sliceElems + " (" + kernel + ")";
    }
}
