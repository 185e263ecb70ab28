package org.sparkccl.core.proto;

/**
 * The receive side of one channel, in the receiving rank's segment. The sender (its ring
 * predecessor) writes slots and the Simple tail; the receiver writes the heads. Every counter has a
 * cache line of its own (two, against adjacent-line prefetch) so that writers never share a line.
 *
 * <pre>
 *  offset 0      LL head      long, written by the receiver: LL steps consumed
 *  offset 128    Simple head  long, written by the receiver: Simple steps consumed
 *  offset 256    Simple tail  long, written by the sender: Simple steps published
 *  offset 4096   LL slots     STEPS x llSlotBytes       ({@link LlLayout})
 *  ...           Simple slots STEPS x simpleSlotBytes   (raw data; step s uses slot s % STEPS)
 * </pre>
 *
 * Simple: the sender waits until head &gt; s - STEPS, writes slot s % STEPS, then publishes
 * tail = s + 1 with a release store; the receiver acquires tail &gt;= s + 1, consumes the slot,
 * then releases head = s + 1.
 */
public final class ChannelLayout {
    public static final int STEPS = 8;
    public static final int LL_HEAD_OFFSET = 0;
    public static final int SIMPLE_HEAD_OFFSET = 128;
    public static final int SIMPLE_TAIL_OFFSET = 256;
    public static final int SLOTS_OFFSET = 4096;

    private final int llSlotBytes;
    private final int simpleSlotBytes;

    /**
     * @param llBufferBytes     wire bytes of LL buffer (rounded down to whole 16-byte lines per slot)
     * @param simpleBufferBytes bytes of Simple buffer (rounded down to 64-byte multiples per slot)
     */
    public ChannelLayout(long llBufferBytes, long simpleBufferBytes) {
        long ll = (llBufferBytes / STEPS) / LlLayout.LINE_BYTES * LlLayout.LINE_BYTES;
        long simple = (simpleBufferBytes / STEPS) / 64 * 64;
        if (ll < LlLayout.LINE_BYTES * 4 || simple < 4096) {
            throw new IllegalArgumentException("LL buffer " + llBufferBytes + " or Simple buffer " + simpleBufferBytes
                    + " bytes is too small: need at least " + STEPS * 64 + " and " + STEPS * 4096);
        }
        if (ll * STEPS + simple * STEPS > Integer.MAX_VALUE / 64) {
            throw new IllegalArgumentException("channel buffers too large: " + llBufferBytes + " + " + simpleBufferBytes);
        }
        this.llSlotBytes = (int) ll;
        this.simpleSlotBytes = (int) simple;
    }

    public int llSlotBytes() {
        return llSlotBytes;
    }

    /** Payload bytes one LL slot carries (half its wire bytes). */
    public int llSlotDataBytes() {
        return llSlotBytes / 2;
    }

    public int simpleSlotBytes() {
        return simpleSlotBytes;
    }

    public int llSlotOffset(long step) {
        return SLOTS_OFFSET + (int) (step % STEPS) * llSlotBytes;
    }

    public int simpleSlotOffset(long step) {
        return SLOTS_OFFSET + STEPS * llSlotBytes + (int) (step % STEPS) * simpleSlotBytes;
    }

    /** Bytes of one channel's receive side, a multiple of 4096. */
    public int channelBytes() {
        long b = SLOTS_OFFSET + (long) STEPS * (llSlotBytes + simpleSlotBytes);
        return (int) ((b + 4095) / 4096 * 4096);
    }
}
