package org.sparkccl.core.proto;

/**
 * The direct all-reduce area of a rank's segment ({@link SegmentLayout}): what a rank tells its
 * peers about one direct all-reduce (its call and where its buffers lie in the registered memory),
 * the two flags that order the phases, and (in rank 0's area) the counter the ranks take chunks
 * from. Each flag is the sequence number of the last direct
 * call that reached that point, released by the owner and acquired by the peers; sequence numbers
 * only grow, so a flag never looks current before it is, and one area serves every call.
 *
 * <pre>
 *  offset   0  arrive flag   int   call posted: header valid, send buffer readable
 *  offset  64  header        32 B  CollectiveHeader of the call
 *  offset  96  send buffer   int   its registration (allocateShared call number), then
 *  offset 100  recv buffer   int   the same for the receive buffer
 *  offset 104  send offset   long  byte offset of the send buffer in its registration
 *  offset 112  recv offset   long
 *  offset 256  done flag     int   this rank has read everything it needs from its peers
 *  offset 320  chunk counter long  rank 0's only: chunks handed out so far, over all calls that share
 *                                  their chunks; a rank takes the next one by compare-and-set
 *  offset 384  end
 * </pre>
 *
 * Flags sit on lines of their own so that a peer spinning on one does not disturb the owner writing
 * another.
 */
public final class DirectLayout {
    public static final int ARRIVE_FLAG_OFFSET = 0;
    public static final int HEADER_OFFSET = 64;
    public static final int SEND_REGISTRATION_OFFSET = 96;
    public static final int RECV_REGISTRATION_OFFSET = 100;
    public static final int SEND_OFFSET_OFFSET = 104;
    public static final int RECV_OFFSET_OFFSET = 112;
    public static final int DONE_FLAG_OFFSET = 256;
    public static final int CHUNK_COUNTER_OFFSET = 320;
    /** Bytes of the area, a multiple of 64. */
    public static final int BYTES = 384;

    private DirectLayout() {
    }
}
