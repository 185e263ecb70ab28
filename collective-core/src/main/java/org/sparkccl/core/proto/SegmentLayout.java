package org.sparkccl.core.proto;

import org.sparkccl.core.wire.WireFormat;

/**
 * Everything a rank exposes to its peers, in one region: a control block that every peer watches,
 * then the receive side of each channel ({@link ChannelLayout}).
 *
 * <pre>
 *  offset 0     magic          long   "sparkccl" in ASCII
 *  offset 8     version        int
 *  offset 12    state          int    0 running, 1 aborted, 2 closed cleanly
 *  offset 16    pid            long   owner's process id
 *  offset 64    attached       long   peers that have opened this region (own line)
 *  offset 128   abort rank     int    rank whose failure caused the abort
 *  offset 132   message length int
 *  offset 136   message        UTF-8, at most MESSAGE_MAX bytes
 *  offset 4096  channel 0 receive side, then channel 1, ...
 *  after them   the one-shot all-reduce slots ({@link OneShotLayout}), if any
 *  after them   the direct all-reduce area ({@link DirectLayout}), if any
 * </pre>
 *
 * Peers, and GPU kernels through their own copy of it, read this block in place, so it is no sealed
 * message: {@link #FORMAT} only checks its magic and version.
 */
public final class SegmentLayout {
    public static final long MAGIC = 0x6c63636b72617073L; // "sparkccl" little-endian
    public static final int VERSION = 1;
    public static final WireFormat FORMAT = WireFormat.inPlace("shared-memory segment", MAGIC, VERSION);
    public static final int MAGIC_OFFSET = 0;
    public static final int VERSION_OFFSET = 8;
    public static final int STATE_OFFSET = 12;
    public static final int PID_OFFSET = 16;
    public static final int ATTACHED_OFFSET = 64;
    public static final int ABORT_RANK_OFFSET = 128;
    public static final int MESSAGE_LENGTH_OFFSET = 132;
    public static final int MESSAGE_OFFSET = 136;
    public static final int MESSAGE_MAX = 4096 - MESSAGE_OFFSET;
    public static final int CONTROL_BYTES = 4096;

    public static final int STATE_RUNNING = 0;
    public static final int STATE_ABORTED = 1;
    public static final int STATE_CLOSED = 2;

    private final ChannelLayout channel;
    private final int channels;
    private final OneShotLayout oneShot;
    private final boolean direct;

    /** Channels only, no one-shot or direct area. */
    public SegmentLayout(ChannelLayout channel, int channels) {
        this(channel, channels, new OneShotLayout(0), false);
    }

    public SegmentLayout(ChannelLayout channel, int channels, OneShotLayout oneShot, boolean direct) {
        this.channel = channel;
        this.channels = channels;
        this.oneShot = oneShot;
        this.direct = direct;
    }

    public ChannelLayout channel() {
        return channel;
    }

    public int channels() {
        return channels;
    }

    public int channelOffset(int c) {
        return CONTROL_BYTES + c * channel.channelBytes();
    }

    public OneShotLayout oneShot() {
        return oneShot;
    }

    /** Where the one-shot area starts, right after the last channel. */
    public int oneShotOffset() {
        return channelOffset(channels);
    }

    /** Whether the segment ends with a direct all-reduce area. */
    public boolean direct() {
        return direct;
    }

    /** Where the direct all-reduce area starts, right after the one-shot area. */
    public long directOffset() {
        return oneShotOffset() + (long) oneShot.totalBytes();
    }

    public long totalBytes() {
        return directOffset() + (direct ? DirectLayout.BYTES : 0);
    }
}
