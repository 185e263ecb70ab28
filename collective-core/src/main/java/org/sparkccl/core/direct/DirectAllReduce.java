package org.sparkccl.core.direct;

import org.agrona.UnsafeApi;
import org.sparkccl.core.CclException;
import org.sparkccl.core.DataType;
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
 *   <li>Reduce-scatter: rank r reduces slice r (1/n of the elements) of every rank's input, in rank
 *       order 0, 1, ..., n-1, into slice r of its own output: remote reads, local writes. It then
 *       releases its reduced flag.</li>
 *   <li>All-gather: once peer p's reduced flag is up, rank r copies slice p of p's output into its
 *       own. Waiting for every peer's reduced flag also means every peer has finished reading this
 *       rank's input, so in place the copy never overwrites data a peer still needs.</li>
 *   <li>Done: a rank releases its done flag and returns only once every peer's is up, so no rank
 *       hands its buffers back to the user (who may overwrite them) while a peer still reads them.</li>
 * </ol>
 *
 * Every element is computed by one rank and copied to the others, so all ranks get the same bits.
 * Why the copy beats the ring's staging slots here: on the CPU machine a core writes lines that the
 * other core read before at only 6-7 GB/s, but reads the other core's lines at 18-28 GB/s; staging
 * makes every byte pay the slow write, this pays it only for the 1/n slice a rank reduces
 * (docs/perf/cpu-allreduce.md).
 *
 * <p><b>Read-all</b> (2 ranks, both out of place, up to {@link #READ_ALL_MAX_BYTES}): each rank
 * skips steps 2 and 3 and reduces all elements of both inputs itself, in rank order, into its own
 * output, which no peer reads, so no write ever invalidates a line in the other core; only the done
 * flag follows. In place it would overwrite an input the peer still reads, and from 3 ranks on (on
 * 2 cores) reading n-1 whole inputs costs more than it saves.
 *
 * <p><b>Shared chunks</b> (3 ranks and more, either placement): instead of steps 2 and 3, the
 * elements are cut into chunks of {@link #BLOCK_BYTES}, and every rank takes the next chunk from a
 * counter in rank 0's area (compare-and-set) until none is left. A rank reduces its chunk of all
 * inputs, in rank order, into a block of its own memory and writes the result into every rank's
 * output. Every input byte is read once and every output byte written once (reduce-scatter +
 * all-gather reads n - 1 slices more, and copies them), and the ranks that have a core do the work
 * while the others wait for one: where ranks outnumber cores (4 rank processes on 2 cores) a rank
 * that must reduce its own slice makes everyone wait for its time slice. In place is safe: a
 * chunk's inputs are read only by the rank that took it, before it writes that chunk's outputs.
 * The counter only grows; each rank knows where a call's chunks start (the sum of the earlier
 * calls' chunk counts, the same on every rank), and a rank claims only below its call's end, so no
 * claim spills into the next call, which no rank enters before every rank finished this one.
 *
 * <p>Why one area per rank suffices for all calls: a rank posts call s + 1 only after every peer's
 * done flag of call s, and a peer raises that only after it has read everything of call s, so
 * nothing of call s is still read when the area is rewritten. Flags carry sequence numbers, which
 * only grow. Not thread safe: the communicator's calling thread runs it.
 */
public final class DirectAllReduce {
    /**
     * Up to this size, 2 ranks that both run out of place use read-all instead of reduce-scatter +
     * all-gather (measured, 2 rank threads, float32 sum: 2-4 MB 270-150 us against 380-480 us, 8 MB
     * even, 16 MB 2.4 ms against 1.5 ms, where reading twice the data from DRAM costs more than the
     * slow writes save).
     */
    private static final long READ_ALL_MAX_BYTES = 4L << 20;
    /** Elements reduced per pass over the n inputs: the partial result stays in L1/L2 between passes. */
    private static final long BLOCK_BYTES = 32 << 10;
    private static final long SLICE_ALIGN_BYTES = 64;
    /** From this many ranks on, ranks share the work chunk by chunk (see the class comment). */
    private static final int SHARED_CHUNKS_MIN_RANKS = 3;

    private final int rank;
    private final int size;
    /** {@code areas[r]}: rank r's direct area as mapped here. */
    private final long[] areas;
    private final SharedBufferRegistry registry;
    private final WaitLoop wait;
    /**
     * One block of this rank's own: in place on ranks 2 and up (reduce-scatter) its own input block is
     * saved here before the output overwrites it; with shared chunks, a chunk's result is built here.
     */
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
        this.scratch = UnsafeApi.allocateMemory(BLOCK_BYTES);
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

        if (size >= SHARED_CHUNKS_MIN_RANKS) {
            reduceSharedChunks(type, mine.op, count);
            finish(seq);
            return;
        }

        if (size == 2 && bytes <= READ_ALL_MAX_BYTES && noRankInPlace()) {
            // Read-all: every rank reduces every element itself (same rank order, so same bits).
            reduceSlice(type, mine.op, 0, count, false);
            if (mine.op == ReduceOp.AVG) {
                Reduction.divide(type, recv, count, size);
            }
            finish(seq);
            return;
        }

        // 2. Reduce-scatter: slice r of every input into slice r of this rank's output.
        long begin = sliceBegin(count, es, rank);
        long end = sliceBegin(count, es, rank + 1);
        reduceSlice(type, mine.op, begin, end, send == recv);
        if (mine.op == ReduceOp.AVG) {
            Reduction.divide(type, recv + begin * es, end - begin, size);
        }
        UnsafeApi.putIntRelease(null, own + DirectLayout.REDUCED_FLAG_OFFSET, seq);

        // 3. All-gather, starting after this rank so that peers do not all read rank 0 first.
        for (int k = 1; k < size; k++) {
            int p = (rank + k) % size;
            await(areas[p] + DirectLayout.REDUCED_FLAG_OFFSET, seq, p, "its reduced slice");
            long from = sliceBegin(count, es, p);
            long n = sliceBegin(count, es, p + 1) - from;
            if (n > 0) {
                UnsafeApi.copyMemory(recvOf[p] + from * es, recv + from * es, n * es);
            }
        }

        finish(seq);
    }

    /**
     * Shared chunks: takes chunks from rank 0's counter until this call's are all taken; each is
     * reduced over all inputs into {@link #scratch} and written to every rank's output.
     */
    private void reduceSharedChunks(DataType type, ReduceOp op, long count) {
        int es = type.size();
        long chunkElems = BLOCK_BYTES / es;
        long chunks = (count + chunkElems - 1) / chunkElems;
        long first = chunksHandedOut;
        long end = first + chunks;
        chunksHandedOut = end;
        long counter = areas[0] + DirectLayout.CHUNK_COUNTER_OFFSET;
        while (true) {
            long next = UnsafeApi.getLongVolatile(null, counter);
            if (next >= end) {
                return;
            }
            if (!UnsafeApi.compareAndSetLong(null, counter, next, next + 1)) {
                continue;
            }
            long at = (next - first) * chunkElems;
            long n = Math.min(chunkElems, count - at);
            long off = at * es;
            Reduction.reduce(type, op, sendOf[0] + off, sendOf[1] + off, scratch, n);
            for (int p = 2; p < size; p++) {
                Reduction.reduce(type, op, scratch, sendOf[p] + off, scratch, n);
            }
            if (op == ReduceOp.AVG) {
                Reduction.divide(type, scratch, n, size);
            }
            // Starting after this rank, so that ranks do not all write rank 0 first.
            for (int k = 1; k <= size; k++) {
                UnsafeApi.copyMemory(scratch, recvOf[(rank + k) % size] + off, n * es);
            }
        }
    }

    /** Whether every rank's receive buffer is apart from its send buffer (every rank decides the same). */
    private boolean noRankInPlace() {
        for (int p = 0; p < size; p++) {
            if (sendOf[p] == recvOf[p]) {
                return false;
            }
        }
        return true;
    }

    /** 4. Done: nobody returns while a peer may still read its buffers. */
    private void finish(int seq) {
        UnsafeApi.putIntRelease(null, areas[rank] + DirectLayout.DONE_FLAG_OFFSET, seq);
        for (int p = 0; p < size; p++) {
            if (p != rank) {
                await(areas[p] + DirectLayout.DONE_FLAG_OFFSET, seq, p, "the end of its direct all-reduce");
            }
        }
    }

    /** {@code recv[i] = in_0[i] op in_1[i] op ... op in_{n-1}[i]} for i in [begin, end), block by block. */
    private void reduceSlice(DataType type, ReduceOp op, long begin, long end, boolean inPlace) {
        int es = type.size();
        long blockElems = BLOCK_BYTES / es;
        long recv = recvOf[rank];
        for (long at = begin; at < end; at += blockElems) {
            long n = Math.min(blockElems, end - at);
            long off = at * es;
            long out = recv + off;
            long mineIn = sendOf[rank] + off;
            if (inPlace && rank >= 2) {
                // The first step writes out (= this rank's input) before this rank's turn comes.
                UnsafeApi.copyMemory(mineIn, scratch, n * es);
                mineIn = scratch;
            }
            long in0 = rank == 0 ? mineIn : sendOf[0] + off;
            long in1 = rank == 1 ? mineIn : sendOf[1] + off;
            Reduction.reduce(type, op, in0, in1, out, n);
            for (int p = 2; p < size; p++) {
                Reduction.reduce(type, op, out, p == rank ? mineIn : sendOf[p] + off, out, n);
            }
        }
    }

    /** First element of rank {@code r}'s slice (r = size: the end), cut at cache-line multiples. */
    private long sliceBegin(long count, int es, int r) {
        long align = Math.max(1, SLICE_ALIGN_BYTES / es);
        long per = (count + size - 1) / size;
        per = (per + align - 1) / align * align;
        return Math.min(count, r * per);
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
