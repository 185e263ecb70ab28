package org.sparkccl.ipc.gpu;

import org.sparkccl.core.DataType;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.proto.ChannelLayout;
import org.sparkccl.core.proto.CollectiveHeader.Kind;
import org.sparkccl.core.proto.Protocol;

/**
 * Picks protocol, channel count and cuts for a collective from its size alone, so that every rank
 * decides the same. {@code SPARKCCL_PROTO}, {@code SPARKCCL_LL_THRESHOLD} and {@code SPARKCCL_NCHANNELS}
 * override.
 */
final class GpuTuner {
    /** LL up to this many bytes per call unless SPARKCCL_LL_THRESHOLD says otherwise. */
    static final long DEFAULT_LL_THRESHOLD = 256L << 10;
    /** A channel (one block) is worth launching with at least this much data. */
    static final long LL_BYTES_PER_CHANNEL = 16L << 10;
    static final long SIMPLE_BYTES_PER_CHANNEL = 512L << 10;
    /** Cut points fall on multiples of 64 bytes, so that 16-byte vector accesses stay aligned. */
    static final long ALIGN_BYTES = 64;
    static final int THREADS = 512;

    private final Protocol forced;
    private final long llThreshold;
    private final int maxChannels;
    private final ChannelLayout layout;

    GpuTuner(Params params, ChannelLayout layout, int maxChannels) {
        String proto = params.get(Params.PROTO).trim();
        this.forced = "auto".equalsIgnoreCase(proto) ? null : Protocol.fromName(proto);
        long t = params.get(Params.LL_THRESHOLD);
        this.llThreshold = t < 0 ? DEFAULT_LL_THRESHOLD : t;
        this.layout = layout;
        this.maxChannels = maxChannels;
    }

    /**
     * @param count the call's count: elements in total (AllReduce, Broadcast) or per rank (ReduceScatter's
     *              receive count, AllGather's send count)
     */
    GpuPlan plan(Kind kind, long count, DataType type, int nranks) {
        boolean copy = kind == Kind.ALL_GATHER || kind == Kind.BROADCAST;
        DataType kernelType = copy ? DataType.UINT8 : type;
        int es = kernelType.size();
        long elems = copy ? count * type.size() : count;
        boolean perRank = kind == Kind.REDUCE_SCATTER || kind == Kind.ALL_GATHER;
        long messageBytes = count * type.size() * (perRank ? nranks : 1);
        Protocol protocol = forced != null ? forced : messageBytes <= llThreshold ? Protocol.LL : Protocol.SIMPLE;
        long align = Math.max(1, ALIGN_BYTES / es);

        long block;
        long total;
        if (kind == Kind.ALL_REDUCE || kind == Kind.BARRIER) {
            block = roundUp(ceilDiv(elems, nranks), align);
            total = elems;
        } else if (perRank) {
            block = elems;
            total = elems * nranks;
        } else {
            block = elems;
            total = elems;
        }
        long perChannel = protocol == Protocol.LL ? LL_BYTES_PER_CHANNEL : SIMPLE_BYTES_PER_CHANNEL;
        long wanted = Math.max(1, messageBytes / perChannel);
        int channels = (int) Math.min(maxChannels, wanted);
        long chunk = roundUp(ceilDiv(block, channels), align);
        channels = (int) Math.max(1, ceilDiv(block, chunk)); // no channel without data
        long slotBytes = protocol == Protocol.LL ? layout.llSlotDataBytes() : layout.simpleSlotBytes();
        long slice = Math.max(align, slotBytes / es / align * align);
        return new GpuPlan(kind, protocol, channels, THREADS, block, total, chunk, slice,
                GpuPlan.kernelName(kernelType, protocol));
    }

    Protocol forcedProtocol() {
        return forced;
    }

    String describe() {
        return "protocol " + (forced == null ? "auto (LL up to " + llThreshold + " bytes, Simple above)"
                : forced.displayName()) + ", up to " + maxChannels + " channel(s)";
    }

    static long ceilDiv(long a, long b) {
        return (a + b - 1) / b;
    }

    static long roundUp(long a, long m) {
        return ceilDiv(a, m) * m;
    }
}
