package org.sparkccl.ipc.gpu;

/**
 * The one-shot all-reduce inboxes at the end of a rank's P2P window (after its channels): two
 * parities (one-shot call k uses parity k % 2) of one inbox per rank, each a run of 16-byte LL lines
 * (two 4-byte data / 4-byte flag pairs, 8 bytes of data per line). Rank s pushes its input into inbox
 * (parity, s) of every peer's window; the owner reads its inboxes locally (one_shot.cuh, oneShotKernel).
 *
 * <pre>
 *  parity 0                                  parity 1
 *  +----------+----------+-----+------------+----------+-----+------------+
 *  | inbox    | inbox    | ... | inbox      | inbox    | ... | inbox      |
 *  | rank 0   | rank 1   |     | rank n-1   | rank 0   |     | rank n-1   |
 *  +----------+----------+-----+------------+----------+-----+------------+
 *  each inbox: ceil(capacity / 8) lines, rounded up to 4096 bytes
 * </pre>
 */
final class GpuOneShotLayout {
    /** The kernel's DevComm has inbox pointers for this many ranks. */
    static final int MAX_RANKS = 8;
    static final int PARITIES = 2;
    static final int LINE_BYTES = 16;
    static final int LINE_DATA_BYTES = 8;

    private final int nranks;
    private final long inboxBytes;

    /** @param capacityBytes the largest one-shot all-reduce, in bytes of user data */
    GpuOneShotLayout(int nranks, long capacityBytes) {
        this.nranks = nranks;
        long lines = Math.max(1, (capacityBytes + LINE_DATA_BYTES - 1) / LINE_DATA_BYTES);
        this.inboxBytes = (lines * LINE_BYTES + 4095) / 4096 * 4096;
    }

    long inboxBytes() {
        return inboxBytes;
    }

    /** Offset of inbox (parity, source) from the start of the area. */
    long inboxOffset(int parity, int source) {
        return ((long) parity * nranks + source) * inboxBytes;
    }

    long totalBytes() {
        return PARITIES * nranks * inboxBytes;
    }
}
