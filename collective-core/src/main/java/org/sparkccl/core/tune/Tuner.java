package org.sparkccl.core.tune;

import org.sparkccl.core.param.Params;
import org.sparkccl.core.proto.Protocol;

/**
 * Picks the protocol and the number of active channels for one collective, from its size alone, so
 * that every rank decides the same. {@code SPARKCCL_PROTO} and {@code SPARKCCL_LL_THRESHOLD} override.
 */
public final class Tuner {
    /**
     * Up to this many bytes per call LL wins on the CPU engine: its flag-per-word costs twice the
     * memory traffic, but it skips the head/tail round trip that dominates small messages.
     */
    public static final long DEFAULT_CPU_LL_THRESHOLD = 64L << 10;
    /** A channel is worth its thread only with at least this much data. */
    public static final long MIN_BYTES_PER_CHANNEL = 512L << 10;

    private final Protocol forced;
    private final long llThreshold;
    private final int channels;

    public Tuner(Params params, int channels) {
        String proto = params.get(Params.PROTO);
        this.forced = "auto".equalsIgnoreCase(proto.trim()) ? null : Protocol.fromName(proto);
        long t = params.get(Params.LL_THRESHOLD);
        this.llThreshold = t < 0 ? DEFAULT_CPU_LL_THRESHOLD : t;
        this.channels = channels;
    }

    public Protocol protocol(long bytes) {
        if (forced != null) {
            return forced;
        }
        return bytes <= llThreshold ? Protocol.LL : Protocol.SIMPLE;
    }

    /** Channels that carry a message of {@code bytes}: 1 for small ones, up to all for large ones. */
    public int activeChannels(long bytes) {
        long byData = Math.max(1, bytes / MIN_BYTES_PER_CHANNEL);
        return (int) Math.min(channels, byData);
    }

    public String describe() {
        return "protocol " + (forced == null ? "auto (LL up to " + llThreshold + " bytes, Simple above)" : forced.displayName())
                + ", " + channels + " channel(s)";
    }
}
