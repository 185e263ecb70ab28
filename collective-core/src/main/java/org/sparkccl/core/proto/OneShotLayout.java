package org.sparkccl.core.proto;

/**
 * The one-shot all-reduce area of a rank's segment ({@link SegmentLayout}): two slots, used in turn
 * (one-shot call u uses slot u % 2). The owner writes its whole input into a slot as LL words, the
 * collective header first, and every peer reads it from there.
 *
 * <pre>
 *  slot 0                                                  slot 1
 *  +------------------------+--------------------------+   +-----...
 *  | header: 8 LL words     | data: LL words, 4 B each |   |
 *  | (CollectiveHeader)     | of payload               |   |
 *  +------------------------+--------------------------+   +-----...
 *  every word's flag is the collective's sequence number
 * </pre>
 *
 * The flag is the sequence number of the call, which every collective advances, so a slot's
 * content from its previous use (an earlier call) never looks current, and zeroed memory never
 * does either (sequence numbers start at 1). Why two slots are enough: see
 * {@code org.sparkccl.core.oneshot.OneShotAllReduce}.
 */
public final class OneShotLayout {
    public static final int SLOTS = 2;
    public static final int HEADER_WORDS = CollectiveHeader.BYTES / LlLayout.DATA_BYTES_PER_WORD;
    public static final int HEADER_WIRE_BYTES = HEADER_WORDS * LlLayout.WORD_BYTES;

    private final int slotDataBytes;
    private final int slotBytes;

    /** @param slotDataBytes payload one slot carries: the largest one-shot all-reduce, in bytes (0: no area) */
    public OneShotLayout(long slotDataBytes) {
        if (slotDataBytes < 0 || slotDataBytes > (Integer.MAX_VALUE / 8)) {
            throw new IllegalArgumentException("one-shot slot of " + slotDataBytes + " bytes is out of range");
        }
        this.slotDataBytes = (int) slotDataBytes;
        long wire = slotDataBytes == 0 ? 0 : HEADER_WIRE_BYTES + LlLayout.wireBytes(slotDataBytes);
        this.slotBytes = (int) ((wire + 4095) / 4096 * 4096);
    }

    /** Payload bytes one slot carries. */
    public int slotDataBytes() {
        return slotDataBytes;
    }

    /** Offset of slot {@code use % SLOTS} from the start of the area; its data words start HEADER_WIRE_BYTES later. */
    public int slotOffset(long use) {
        return (int) (use & 1) * slotBytes;
    }

    /** Bytes of the whole area, a multiple of 4096. */
    public int totalBytes() {
        return SLOTS * slotBytes;
    }
}
