package org.sparkccl.core.direct;

import org.agrona.UnsafeApi;
import org.sparkccl.core.CclException;
import org.sparkccl.core.DataType;
import org.sparkccl.core.jdk.JdkAccess;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.proto.CollectiveHeader;
import org.sparkccl.core.proto.DirectLayout;
import org.sparkccl.core.reduce.Reduction;
import org.sparkccl.core.wait.WaitLoop;

/**
 * All-reduce of buffers that lie in shared memory on every rank ({@link SharedBufferRegistry}):
 * no staging slots, every byte read straight from the peer that owns it.
 *
 * <ol>
 *   <li>Arrive: each rank posts its call and where its buffers lie ({@link DirectLayout}) and
 *       releases its arrive flag; it then acquires every peer's, checks the peer's call against its
 *       own and finds the peer's buffers in its own mapping.</li>
 *   <li>Shared chunks: the elements are cut into chunks of {@link #CHUNK_BYTES}, and every rank
 *       takes the next chunk from a counter in rank 0's area (compare-and-set) until none is left.
 *       It reduces its chunk of all inputs, in rank order, and writes the result into every rank's
 *       output. Every input byte is read once and every output byte written once, and the ranks
 *       that have a core do the work while the others wait for one.</li>
 *   <li>Done: a rank releases its done flag once it takes no more chunks, and returns only once
 *       every peer's is up: then every chunk is written, and no peer reads its buffers any more (the
 *       user may overwrite them).</li>
 * </ol>
 *
 * Every element is computed by one rank and copied to the others, so all ranks get the same bits.
 * In place is safe: a chunk's inputs are read only by the rank that took it, before it writes that
 * chunk's outputs. The counter only grows; each rank knows where a call's chunks start (the sum of
 * the earlier calls' chunk counts, the same on every rank) and takes only below its call's end, so
 * no claim spills into the next call, which no rank enters before every rank finished this one.
 *
 * <p>Measured against the reduce-scatter + all-gather this replaced (rank r reduced slice r into its
 * own output, then copied the peers' slices from theirs): 4 rank JVMs on 2 cores 1.5-2x the busbw
 * at 1-16 MB (a rank that must reduce its own slice makes everyone wait for its time slice, and the
 * all-gather read n - 1 slices once more); 2 ranks in place 2-4x (median call 1 MB 45 against 185
 * us, 8 MB 414 against 1412 us).
 *
 * <p>Shared chunks write into the peers' outputs, whose lines the peers hold; the result goes out
 * through {@link org.sparkccl.core.copy.BulkCopy}, which writes such lines without fetching them
 * first. With it, shared chunks also replaced read-all (2 ranks out of place up to 4 MB: each rank
 * reduced both inputs into its own output), which measured faster before: 2 rank JVMs, -R 1, median
 * call, two rounds each, 256 KB - 2 MB 15.4-15.6 / 28.6-29.7 / 59.4-61.2 / 132-138 us against
 * 16.3-16.8 / 33.1-33.6 / 64.4-65.0 / 134-136 us, 4 MB 311-325 against 329-351 us.
 *
 * <p>Why one area per rank suffices for all calls: a rank posts call s + 1 only after every peer's
 * done flag of call s, and a peer raises that only after it has read everything of call s, so
 * nothing of call s is still read when the area is rewritten. Flags carry sequence numbers, which
 * only grow. Not thread safe: the communicator's calling thread runs it.
 */
public final class DirectAllReduce {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    /** Bytes per chunk: big enough that taking one (a compare-and-set on a shared line) costs little. */
    private static final long CHUNK_BYTES = 32 << 10;

    private final int rank;
    private final int size;
    /** {@code areas[r]}: rank r's direct area as mapped here. */
    private final long[] areas;
    private final SharedBufferRegistry registry;
    private final WaitLoop wait;
    /** One chunk of this rank's own, for the types that reduce through memory (see Reduction.reduceToAll). */
    private final long scratch;
    private final long[] sendOf;
    private final long[] recvOf;
    /** Chunks of all shared-chunk calls so far: where the next such call's chunks start on the counter. */
    private long chunksHandedOut;

    public DirectAllReduce(int rank, int size, long[] areas, SharedBufferRegistry registry, WaitLoop wait) {
        this.rank = rank;
        this.size = size;
        this.areas = areas.clone();
        this.registry = registry;
        this.wait = wait;
        this.scratch = UnsafeApi.allocateMemory(CHUNK_BYTES);
        this.sendOf = new long[size];
        this.recvOf = new long[size];
    }

    /**
     * Reduces {@code mine.count} elements of {@code send} (registration {@code sendReg}) over all
     * ranks into {@code recv} (registration {@code recvReg}; may be {@code send}).
     */
    public void allReduce(CollectiveHeader mine, long send, int sendReg, long recv, int recvReg) {
        DataType type = mine.type;
        int es = type.size();
        long count = mine.count;
        int seq = mine.sequence;
        long own = areas[rank];

        // 1. Arrive.
        mine.write(own + DirectLayout.HEADER_OFFSET);
        UnsafeApi.putInt(own + DirectLayout.SEND_REGISTRATION_OFFSET, sendReg);
        UnsafeApi.putInt(own + DirectLayout.RECV_REGISTRATION_OFFSET, recvReg);
        UnsafeApi.putLong(own + DirectLayout.SEND_OFFSET_OFFSET, send - registry.base(sendReg));
        UnsafeApi.putLong(own + DirectLayout.RECV_OFFSET_OFFSET, recv - registry.base(recvReg));
        UnsafeApi.putIntRelease(null, own + DirectLayout.ARRIVE_FLAG_OFFSET, seq);
        long bytes = count * es;
        for (int p = 0; p < size; p++) {
            if (p == rank) {
                sendOf[p] = send;
                recvOf[p] = recv;
                continue;
            }
            long area = areas[p];
            await(area + DirectLayout.ARRIVE_FLAG_OFFSET, seq, p, "its direct all-reduce call");
            checkHeader(mine, own + DirectLayout.HEADER_OFFSET, area + DirectLayout.HEADER_OFFSET, p);
            sendOf[p] = registry.peerAddress(p, UnsafeApi.getInt(area + DirectLayout.SEND_REGISTRATION_OFFSET),
                    UnsafeApi.getLong(area + DirectLayout.SEND_OFFSET_OFFSET), bytes, mine);
            recvOf[p] = registry.peerAddress(p, UnsafeApi.getInt(area + DirectLayout.RECV_REGISTRATION_OFFSET),
                    UnsafeApi.getLong(area + DirectLayout.RECV_OFFSET_OFFSET), bytes, mine);
        }

        // 2. Reduce.
        reduceSharedChunks(type, mine.op, count);

        // 3. Done.
        UnsafeApi.putIntRelease(null, own + DirectLayout.DONE_FLAG_OFFSET, seq);
        for (int p = 0; p < size; p++) {
            if (p != rank) {
                await(areas[p] + DirectLayout.DONE_FLAG_OFFSET, seq, p, "the end of its direct all-reduce");
            }
        }
    }

    /** Shared chunks: takes chunks from rank 0's counter until this call's are all taken. */
    private void reduceSharedChunks(DataType type, ReduceOp op, long count) {
        int es = type.size();
        long chunkElems = CHUNK_BYTES / es;
        long first = chunksHandedOut;
        long end = first + (count + chunkElems - 1) / chunkElems;
        chunksHandedOut = end;
        long counter = areas[0] + DirectLayout.CHUNK_COUNTER_OFFSET;
        while (true) {
            long next = UnsafeApi.getLongVolatile(null, counter);
            if (next >= end) {
                return;
            }
            if (UnsafeApi.compareAndSetLong(null, counter, next, next + 1)) {
                long at = (next - first) * chunkElems;
                Reduction.reduceToAll(type, op, sendOf, size, recvOf, size, at * es, Math.min(chunkElems, count - at),
                        scratch);
            }
        }
    }

    /**
     * For mismatch diagnosis while another algorithm's wait is stuck: copies into {@code into} the
     * header {@code peer} posted for call {@code sequence}, if it posted one; never waits.
     */
    public boolean peekHeader(int peer, int sequence, long into) {
        long area = areas[peer];
        if (UnsafeApi.getIntAcquire(null, area + DirectLayout.ARRIVE_FLAG_OFFSET) != sequence) {
            return false;
        }
        UnsafeApi.copyMemory(area + DirectLayout.HEADER_OFFSET, into, CollectiveHeader.BYTES);
        return true;
    }

    private void checkHeader(CollectiveHeader mine, long mineAt, long theirsAt, int peer) {
        if (!CollectiveHeader.sameBytes(mineAt, theirsAt)) {
            CollectiveHeader theirs = CollectiveHeader.read(theirsAt);
            throw new CclException("rank " + rank + ": collective mismatch: this rank called " + mine.describe()
                    + " on shared buffers but rank " + peer + " called "
                    + (theirs == null ? "something unreadable" : theirs.describe())
                    + "; every rank must make the same collective calls, in the same order, with the same count,"
                    + " type and op");
        }
    }

    private void await(long flag, int seq, int peer, String what) {
        if (UnsafeApi.getIntAcquire(null, flag) != seq) {
            do {
                wait.idle(peer, seq, what);
            } while (UnsafeApi.getIntAcquire(null, flag) != seq);
            wait.done();
        }
    }

    public void close() {
        UnsafeApi.freeMemory(scratch);
    }
}
