package org.sparkccl.ipc.gpu;

import org.sparkccl.core.DataType;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.proto.ChannelLayout;
import org.sparkccl.core.proto.CollectiveHeader.Kind;
import org.sparkccl.core.proto.Protocol;

/**
 * Picks protocol, channel count and cuts for a collective from its size alone, so that every rank
 * decides the same. {@code SPARKCCL_PROTO}, {@code SPARKCCL_LL_THRESHOLD}, {@code SPARKCCL_LL128_THRESHOLD}
 * and {@code SPARKCCL_NCHANNELS} override. LL128 is a choice only where the communicator made its
 * connections (every hop of the ring NVLink or within one GPU); its thresholds come from {@link GpuCostModel}.
 */
final class GpuTuner {
    /** LL up to this many bytes per call unless SPARKCCL_LL_THRESHOLD says otherwise. */
    static final long DEFAULT_LL_THRESHOLD = 256L << 10;
    /** A channel (one block) is worth launching with at least this much data. */
    static final long LL_BYTES_PER_CHANNEL = 16L << 10;
    /**
     * One block moves about 10 GB/s through a Simple FIFO, so mid-size messages need many: with 512 KB per
     * channel a 512 KB - 4 MB all-reduce took a flat ~42 us of kernel on 2 x H200.
     */
    static final long SIMPLE_BYTES_PER_CHANNEL = 64L << 10;
    /** Cut points fall on multiples of 64 bytes, so that 16-byte vector accesses stay aligned. */
    static final long ALIGN_BYTES = 64;
    static final int THREADS = 512;
    /**
     * All-reduce runs one-shot up to this many bytes divided by the number of ranks (where every pair of
     * GPUs is peer-to-peer) unless SPARKCCL_ONESHOT_THRESHOLD says otherwise: each rank pushes its
     * input to every peer, (n - 1) times the data a ring moves per rank in one direction. Measured on
     * 2 x H200 (docs/perf/gpu-allreduce.md): one-shot 18.6-20.5 us from 8 B to 256 KB where the ring takes
     * 24-36 us; 35 / 41 / 57 / 92 us at 1 / 2 / 4 / 8 MB where the ring takes 47 / 53 / 56 / 63 us. More
     * ranks were not measured (no 4- or 8-GPU machine was lent); dividing by n keeps the inboxes
     * (2 x n x 2 x threshold bytes) at 16 MB.
     */
    static final long DEFAULT_ONESHOT_BYTES_TIMES_RANKS = 4L << 20;
    /** An LL128 channel carries at least this much: between LL's and Simple's, as its rate per block is. */
    static final long LL128_BYTES_PER_CHANNEL = 32L << 10;
    /** The most input a one-shot block takes while a larger call can have more blocks: 2 lines a thread. */
    static final long ONESHOT_MAX_BLOCK_BYTES = 8L << 10;

    private final Protocol forced;
    private final long llThreshold;
    private final int maxChannels;
    private final ChannelLayout layout;
    private final long oneShotThreshold;
    /** The least input of a one-shot block (SPARKCCL_ONESHOT_BLOCK_BYTES): see {@link #oneShotBlocks}. */
    private final long oneShotBlockBytes;
    private final boolean oneShotForced;
    /** The LL128 connections' layout; null where LL128 cannot run. */
    private final GpuLl128Layout ll128;
    /** LL128 for messages of more than ll128From and at most ll128UpTo bytes (none where from >= upTo). */
    private final long ll128From;
    private final long ll128UpTo;

    /** A tuner without one-shot all-reduce. */
    GpuTuner(Params params, ChannelLayout layout, int maxChannels) {
        this(params, layout, maxChannels, 0);
    }

    /**
     * @param oneShotThreshold the largest all-reduce in bytes that runs one-shot: what the communicator's
     *                         inboxes hold ({@link #oneShotCapacity}) where every pair of GPUs is P2P, else 0
     */
    GpuTuner(Params params, ChannelLayout layout, int maxChannels, long oneShotThreshold) {
        this(params, layout, maxChannels, oneShotThreshold, null, GpuCostModel.Link.NVLINK, 2);
    }

    /**
     * @param ll128  the LL128 connections where every hop of the ring is NVLink or within one GPU, else null
     * @param link   what the ring's hops are (the slowest kind), for the cost model
     * @param nranks the communicator's size, for the cost model
     */
    GpuTuner(Params params, ChannelLayout layout, int maxChannels, long oneShotThreshold, GpuLl128Layout ll128,
             GpuCostModel.Link link, int nranks) {
        String proto = params.get(Params.PROTO).trim();
        this.forced = "auto".equalsIgnoreCase(proto) ? null : Protocol.fromName(proto);
        this.ll128 = ll128;
        long t = params.get(Params.LL_THRESHOLD);
        this.llThreshold = t < 0 ? DEFAULT_LL_THRESHOLD : t;
        long t128 = params.get(Params.LL128_THRESHOLD);
        long[] band = GpuCostModel.ll128Band(link, nranks);
        if (ll128 == null) {
            this.ll128From = 0;
            this.ll128UpTo = 0;
        } else if (t128 >= 0) {
            this.ll128From = llThreshold;
            this.ll128UpTo = t128;
        } else {
            this.ll128From = t >= 0 ? Math.max(t, band[0]) : band[0];
            this.ll128UpTo = band[1];
        }
        this.layout = layout;
        this.maxChannels = maxChannels;
        this.oneShotThreshold = oneShotThreshold;
        this.oneShotBlockBytes = params.get(Params.ONESHOT_BLOCK_BYTES);
        this.oneShotForced = "OneShot".equalsIgnoreCase(params.get(Params.ALGO).trim());
    }

    /**
     * Threads per one-shot block: one per 8-byte line of the block's share, in whole warps, plus block 0's
     * header warp, at most THREADS. A small call launches a small block: the GPU starts it sooner (in a
     * CUDA graph the gap between two one-shot kernels of 512 threads was 1.65 us, against 0.83 us for a
     * null kernel, one H200), and threads without a line would only wait at the block's barrier.
     */
    static int oneShotThreads(long messageBytes, int blocks) {
        long lines = Math.max(1, ceilDiv(ceilDiv(messageBytes, 8), blocks));
        return (int) Math.min(THREADS, 32 + roundUp(lines, 32));
    }

    /**
     * Blocks of a one-shot all-reduce of {@code bytes}: one per SPARKCCL_ONESHOT_BLOCK_BYTES (2 KB) up to
     * the 16 blocks that programmatic dependent launch takes (Params.PDL_MAX_BLOCKS_LIMIT), then 16 blocks
     * up to 16 x ONESHOT_MAX_BLOCK_BYTES (128 KB), then one per 8 KB, at most one per channel. Measured in
     * a CUDA graph (one H100, 2 ranks as threads, same run): 8 KB took 3.4 us in blocks of 2 KB, 3.9 in
     * blocks of 4 KB, 4.1 in one block; 32 KB 3.6 / 4.0 / 4.3; 128 KB 4.2 in 16 blocks of 8 KB against 6.2
     * in 32 or 64 blocks, which launch plainly.
     */
    int oneShotBlocks(long bytes) {
        long blocks = ceilDiv(bytes, oneShotBlockBytes);
        if (blocks > Params.PDL_MAX_BLOCKS_LIMIT) {
            blocks = Math.max(Params.PDL_MAX_BLOCKS_LIMIT, ceilDiv(bytes, ONESHOT_MAX_BLOCK_BYTES));
        }
        return (int) Math.max(1, Math.min(maxChannels, blocks));
    }

    /**
     * The largest all-reduce that may run one-shot, in bytes, as the settings say: what the inboxes
     * must hold (0: one-shot off, with SPARKCCL_ALGO=Ring or SPARKCCL_ONESHOT_THRESHOLD=0).
     */
    static long oneShotCapacity(Params params, int nranks) {
        if ("Ring".equalsIgnoreCase(params.get(Params.ALGO).trim())) {
            return 0;
        }
        long t = params.get(Params.ONESHOT_THRESHOLD);
        return t >= 0 ? t : roundUp(DEFAULT_ONESHOT_BYTES_TIMES_RANKS / nranks, ALIGN_BYTES);
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
        Protocol protocol = forced != null ? forced
                : messageBytes > ll128From && messageBytes <= ll128UpTo ? Protocol.LL128
                : messageBytes <= llThreshold ? Protocol.LL : Protocol.SIMPLE;
        // One-shot up to its threshold unless the ring's Simple protocol is forced (ALGO=OneShot wins over that).
        if (kind == Kind.ALL_REDUCE && messageBytes <= oneShotThreshold && (oneShotForced || forced != Protocol.SIMPLE)) {
            int blocks = oneShotBlocks(messageBytes);
            return GpuPlan.oneShot(count, type, blocks, oneShotThreads(messageBytes, blocks));
        }
        if (protocol == Protocol.LL128 && ll128 == null) {
            // GpuCommunicator refuses SPARKCCL_PROTO=LL128 at connect, naming the hop; this is the backstop.
            throw new IllegalStateException("SPARKCCL_PROTO=LL128 needs every hop of the ring over NVLink or within "
                    + "one GPU; use LL, Simple or auto here");
        }
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
        long perChannel = switch (protocol) {
            case LL -> LL_BYTES_PER_CHANNEL;
            case LL128 -> LL128_BYTES_PER_CHANNEL;
            case SIMPLE -> SIMPLE_BYTES_PER_CHANNEL;
        };
        long wanted = Math.max(1, messageBytes / perChannel);
        int channels = (int) Math.min(maxChannels, wanted);
        long chunk = roundUp(ceilDiv(block, channels), align);
        channels = (int) Math.max(1, ceilDiv(block, chunk)); // no channel without data
        long slotBytes = switch (protocol) {
            case LL -> layout.llSlotDataBytes();
            case LL128 -> ll128.slotDataBytes();
            case SIMPLE -> layout.simpleSlotBytes();
        };
        long slice = Math.max(align, slotBytes / es / align * align);
        return new GpuPlan(kind, protocol, channels, THREADS, block, total, chunk, slice,
                GpuPlan.kernelName(kernelType, protocol));
    }

    Protocol forcedProtocol() {
        return forced;
    }

    String describe() {
        return "protocol " + (forced == null ? "auto (LL up to " + llThreshold + " bytes, "
                + (ll128 == null ? "" : ll128From < ll128UpTo ? "LL128 from " + ll128From + " to " + ll128UpTo + " bytes, "
                : "LL128 never (cost model), ") + "Simple above)"
                : forced.displayName()) + ", all-reduce " + (oneShotThreshold == 0 ? "ring"
                : "one-shot up to " + oneShotThreshold + " bytes" + (oneShotForced ? " (forced)" : "") + ", ring above")
                + ", up to " + maxChannels + " channel(s)";
    }

    static long ceilDiv(long a, long b) {
        return (a + b - 1) / b;
    }

    static long roundUp(long a, long m) {
        return ceilDiv(a, m) * m;
    }
}
