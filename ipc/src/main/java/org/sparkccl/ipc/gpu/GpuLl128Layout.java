package org.sparkccl.ipc.gpu;

import org.sparkccl.core.proto.ChannelLayout;

/**
 * The LL128 receive sides at the end of a rank's P2P window (after its channels and the one-shot
 * inboxes), one per channel. The predecessor writes the slots; the receiver writes the head, on a
 * cache line of its own. A slot is a run of 128-byte lines, each 120 bytes of data and a 64-bit flag
 * in its last 8 bytes (prims_ll128.cuh, Ll128Link).
 *
 * <pre>
 *  per channel (channelBytes(), a multiple of 4096):
 *  offset 0      head    long, written by the receiver: LL128 steps consumed
 *  offset 4096   slots   STEPS x slotBytes (step s uses slot s % STEPS)
 * </pre>
 */
final class GpuLl128Layout {
    static final int LINE_BYTES = 128;
    static final int LINE_DATA_BYTES = 120;
    static final int HEAD_OFFSET = 0;
    static final int SLOTS_OFFSET = 4096;

    private final int channels;
    private final long slotBytes;

    /** @param bufferBytes wire bytes per channel (SPARKCCL_LL128_BUFFSIZE), cut into STEPS slots of whole lines */
    GpuLl128Layout(int channels, long bufferBytes) {
        long slot = bufferBytes / ChannelLayout.STEPS / LINE_BYTES * LINE_BYTES;
        if (slot < 4 * LINE_BYTES) {
            throw new IllegalArgumentException("SPARKCCL_LL128_BUFFSIZE " + bufferBytes + " is too small: need at least "
                    + ChannelLayout.STEPS * 4 * LINE_BYTES + " bytes (" + ChannelLayout.STEPS + " slots of 4 lines)");
        }
        if (slot * ChannelLayout.STEPS > Integer.MAX_VALUE / 64) {
            throw new IllegalArgumentException("SPARKCCL_LL128_BUFFSIZE " + bufferBytes + " is too large");
        }
        this.channels = channels;
        this.slotBytes = slot;
    }

    long slotBytes() {
        return slotBytes;
    }

    /** User bytes one slot carries: 120 of every 128. */
    long slotDataBytes() {
        return slotBytes / LINE_BYTES * LINE_DATA_BYTES;
    }

    /** Bytes of one channel's receive side, a multiple of 4096. */
    long channelBytes() {
        return (SLOTS_OFFSET + ChannelLayout.STEPS * slotBytes + 4095) / 4096 * 4096;
    }

    /** Offset of channel c's receive side from the start of the area. */
    long channelOffset(int c) {
        return c * channelBytes();
    }

    long totalBytes() {
        return channels * channelBytes();
    }
}
