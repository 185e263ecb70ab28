package org.sparkccl.core.tune;

import org.sparkccl.core.param.Params;
import org.sparkccl.core.proto.Protocol;

/**
 * Picks the algorithm, protocol and number of active channels for one collective, from its size
 * alone, so that every rank decides the same. {@code SPARKCCL_ALGO}, {@code SPARKCCL_PROTO},
 * {@code SPARKCCL_LL_THRESHOLD}, {@code SPARKCCL_ONESHOT_THRESHOLD} and
 * {@code SPARKCCL_DIRECT_THRESHOLD} override.
 */
public final class Tuner {
    /**
     * Up to this many bytes per call LL wins on the CPU engine: its flag-per-word costs twice the
     * memory traffic, but it skips the head/tail round trip that dominates small messages.
     */
    public static final long DEFAULT_CPU_LL_THRESHOLD = 64L << 10;
    /**
     * Up to this many bytes an all-reduce runs one-shot (one exchange, every rank reads all inputs)
     * rather than as a ring (a header exchange and 2(n-1) dependent steps). 128 KB: on the 2-core CI
     * VM (plain buffers, float sum, busbw out / in place) one-shot gave 128 KB 2.1 / 2.2 GB/s at 4
     * ranks (the ring 0.8 / 0.2: 6 dependent steps, each waiting for a rank's time slice) and 6.5 /
     * 4.9 at 2 ranks (ring 3.8 / 2.6); from 256 KB on the ring is as fast or faster.
     */
    public static final long DEFAULT_ONESHOT_THRESHOLD = 128L << 10;
    /**
     * From this many bytes on, an all-reduce of shared buffers (allocateShared on every rank) runs
     * direct rather than one-shot or as a ring.
     */
    public static final long DEFAULT_DIRECT_THRESHOLD = (64L << 10) + 1;
    /** A channel is worth its thread only with at least this much data. */
    public static final long MIN_BYTES_PER_CHANNEL = 512L << 10;

    private final Protocol forced;
    private final long llThreshold;
    private final boolean oneShotForced;
    private final long oneShotThreshold;
    /** Shared buffers of at least this many bytes run direct; Long.MAX_VALUE: never. */
    private final long directThreshold;
    private final int channels;

    public Tuner(Params params, int channels) {
        String proto = params.get(Params.PROTO);
        this.forced = "auto".equalsIgnoreCase(proto.trim()) ? null : Protocol.fromName(proto);
        if (forced == Protocol.LL128) {
            // Its whole-line stores are a GPU thing: a CPU store of 128 bytes is not seen by a peer at once.
            throw new IllegalArgumentException("SPARKCCL_PROTO=LL128 is a GPU protocol (NVLink or one GPU); the host "
                    + "engine runs LL or Simple: set SPARKCCL_PROTO to LL, Simple or auto for CPU communicators");
        }
        long t = params.get(Params.LL_THRESHOLD);
        this.llThreshold = t < 0 ? DEFAULT_CPU_LL_THRESHOLD : t;
        String algo = params.get(Params.ALGO);
        this.oneShotForced = "OneShot".equals(algo);
        long o = params.get(Params.ONESHOT_THRESHOLD);
        this.oneShotThreshold = "Ring".equals(algo) ? 0 : o < 0 ? DEFAULT_ONESHOT_THRESHOLD : o;
        long d = params.get(Params.DIRECT_THRESHOLD);
        this.directThreshold = "Direct".equals(algo) ? 0 : !"auto".equals(algo) ? Long.MAX_VALUE
                : d < 0 ? DEFAULT_DIRECT_THRESHOLD : d;
        this.channels = channels;
    }

    public Protocol protocol(long bytes) {
        if (forced != null) {
            return forced;
        }
        return bytes <= llThreshold ? Protocol.LL : Protocol.SIMPLE;
    }

    /** Bytes the one-shot slots must carry: the largest all-reduce that may run one-shot (0: none). */
    public long oneShotSlotBytes() {
        return oneShotThreshold;
    }

    /**
     * Whether an all-reduce of {@code bytes} runs one-shot: up to the one-shot threshold, unless
     * SPARKCCL_PROTO=Simple pins the ring (so tests can run it at small sizes) and ALGO=OneShot does
     * not force one-shot back.
     */
    public boolean oneShotAllReduce(long bytes) {
        return oneShotThreshold > 0 && bytes <= oneShotThreshold && (oneShotForced || forced != Protocol.SIMPLE);
    }

    /**
     * Whether an all-reduce of {@code bytes} runs direct when its buffers are shared buffers on this
     * rank (every rank must find the same; a rank that does not fails the call on every rank).
     */
    public boolean directAllReduce(long bytes) {
        return bytes >= directThreshold;
    }

    /** Channels that carry a message of {@code bytes}: 1 for small ones, up to all for large ones. */
    public int activeChannels(long bytes) {
        long byData = Math.max(1, bytes / MIN_BYTES_PER_CHANNEL);
        return (int) Math.min(channels, byData);
    }

    public String describe() {
        return "protocol " + (forced == null ? "auto (LL up to " + llThreshold + " bytes, Simple above)" : forced.displayName())
                + ", all-reduce " + (oneShotThreshold == 0 ? "ring" : "one-shot up to " + oneShotThreshold + " bytes"
                + (oneShotForced ? " (forced)" : forced == Protocol.SIMPLE ? " (never: protocol Simple)" : "")
                + ", ring above") + ", shared buffers " + (directThreshold == Long.MAX_VALUE ? "as any other"
                : "direct from " + directThreshold + " bytes") + ", " + channels + " channel(s)";
    }
}
