package org.sparkccl.core.proto;

/**
 * The one-shot all-reduce area of a rank's segment ({@link SegmentLayout}): two slots, used in turn
 * (one-shot call u uses slot u % 2). The owner writes the collective header and its whole input
 * into a slot as plain bytes, then publishes the slot by a release store of the call's sequence
 * number into the slot's flag; every peer acquires the flag, then reads header and data in place.
 *
 * <pre>
 *  slot 0 (a multiple of 4096 bytes)                          slot 1
 *  +------------+------------------+--------+-------------+   +-----...
 *  | flag (int) | header (32 B,    |  pad   | data        |   |
 *  | own line   | CollectiveHeader)|        | (raw bytes) |   |
 *  +------------+------------------+--------+-------------+   +-----...
 *  0            64                 96       128
 * </pre>
 *
 * The flag is the sequence number of the call, which every collective advances, so a slot's flag
 * from its previous use never looks current, and zeroed memory never does either (sequence numbers
 * start at 1). Raw data with one flag, rather than LL words with a flag in every word, halves the
 * bytes that cross between cores and lets readers reduce straight from the slot; measured faster
 * from 2 KB up (see docs/perf/cpu-allreduce.md). Why two slots are enough: see
 * {@code org.sparkccl.core.oneshot.OneShotAllReduce}.
 */
public final class OneShotLayout {
    public static final int SLOTS = 2;
    public static final int FLAG_OFFSET = 0;
    public static final int HEADER_OFFSET = 64;
    public static final int DATA_OFFSET = 128;

    private final int slotDataBytes;
    private final int slotBytes;

    /** @param slotDataBytes payload one slot carries: the largest one-shot all-reduce, in bytes (0: no area) */
    public OneShotLayout(long slotDataBytes) {
        if (slotDataBytes < 0 || slotDataBytes > (Integer.MAX_VALUE / 8)) {
            throw new IllegalArgumentException("one-shot slot of " + slotDataBytes + " bytes is out of range");
        }
        this.slotDataBytes = (int) slotDataBytes;
        long bytes = slotDataBytes == 0 ? 0 : DATA_OFFSET + slotDataBytes;
        this.slotBytes = (int) ((bytes + 4095) / 4096 * 4096);
    }

    /** Payload bytes one slot carries. */
    public int slotDataBytes() {
        return slotDataBytes;
    }

    /** Offset of slot {@code use % SLOTS} from the start of the area. */
    public int slotOffset(long use) {
        return (int) (use & 1) * slotBytes;
    }

    /** Bytes of the whole area, a multiple of 4096. */
    public int totalBytes() {
        return SLOTS * slotBytes;
    }
}
