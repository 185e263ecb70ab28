package org.sparkccl.core.oneshot;

import org.agrona.UnsafeApi;
import org.sparkccl.core.CclException;
import org.sparkccl.core.DataType;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.proto.CollectiveHeader;
import org.sparkccl.core.proto.LlLayout;
import org.sparkccl.core.proto.OneShotLayout;
import org.sparkccl.core.reduce.Reduction;
import org.sparkccl.core.wait.WaitLoop;

/**
 * All-reduce of small messages in one exchange: each rank writes its collective header and its whole
 * input as LL words into a slot of its own segment ({@link OneShotLayout}), then reads every peer's
 * slot and reduces all n inputs itself, in rank order 0, 1, ..., n-1, so that every rank computes
 * the same operations on the same values and ends with the same bits. The ring needs a header
 * exchange and 2(n-1) dependent steps; this needs one, at the price of every rank reading all
 * n-1 peers' inputs, which is cheap only while messages are small.
 *
 * <p><b>Why two slots, used in turn, are safe to overwrite.</b> Rank r writes slot u % 2 in its
 * one-shot call u and writes it again only in call u + 2. Every rank makes the same one-shot calls
 * in the same order (the tuner decides from the call alone, and a call that differs fails at the
 * header check). Before r can start call u + 2 it must finish call u + 1, which means reading every
 * peer p's call-(u + 1) words; p writes those only after it has returned from call u, that is after
 * its last read of r's call-u slot (program order, and the release stores of p's words order its
 * earlier reads before them; r's acquire loads of those words order its later writes after them).
 * So no peer can still be reading slot u % 2 when r overwrites it: a rank is at most one one-shot
 * call ahead of any peer. The flags are the calls' sequence numbers, so a reader never takes the
 * previous use's words (or zeroed memory) for the current ones.
 *
 * <p>Not thread safe: the communicator's calling thread runs it.
 */
public final class OneShotAllReduce implements AutoCloseable {
    private final int rank;
    private final int size;
    private final OneShotLayout layout;
    /** Address of each rank's one-shot area (this rank's own included), as mapped in this process. */
    private final long[] areas;
    private final WaitLoop wait;
    private final long scratch;
    private final long mineHeader;
    private final long theirHeader;
    private long uses;

    public OneShotAllReduce(int rank, int size, OneShotLayout layout, long[] areas, WaitLoop wait) {
        this.rank = rank;
        this.size = size;
        this.layout = layout;
        this.areas = areas.clone();
        this.wait = wait;
        this.scratch = UnsafeApi.allocateMemory(Math.max(8, layout.slotDataBytes()));
        this.mineHeader = UnsafeApi.allocateMemory(2L * CollectiveHeader.BYTES);
        this.theirHeader = mineHeader + CollectiveHeader.BYTES;
    }

    /** Largest message, in bytes, that fits one slot. */
    public long capacityBytes() {
        return layout.slotDataBytes();
    }

    /**
     * Reduces {@code mine.count} elements of {@code send} over all ranks into {@code recv} (may be
     * {@code send}). {@code mine} is this rank's call; a peer whose header differs makes it throw.
     */
    public void allReduce(CollectiveHeader mine, long send, long recv) {
        DataType type = mine.type;
        ReduceOp op = mine.op;
        long count = mine.count;
        long bytes = count * type.size();
        if (bytes > layout.slotDataBytes()) {
            throw new IllegalArgumentException("rank " + rank + ": " + bytes + " bytes do not fit the one-shot slot of "
                    + layout.slotDataBytes());
        }
        int slot = layout.slotOffset(uses++);
        int flag = mine.sequence;
        long own = areas[rank] + slot;
        mine.write(mineHeader);
        pack(mineHeader, own, CollectiveHeader.BYTES, flag);
        pack(send, own + OneShotLayout.HEADER_WIRE_BYTES, bytes, flag);

        for (int p = 0; p < size; p++) {
            long src;
            if (p == rank) {
                if (send != recv || p == 0) {
                    src = send;
                } else {
                    // In place: peer 0's input has replaced ours in recv, but ours is in our slot.
                    unpack(own + OneShotLayout.HEADER_WIRE_BYTES, scratch, bytes, flag, p);
                    src = scratch;
                }
            } else {
                long peerSlot = areas[p] + slot;
                checkHeader(mine, peerSlot, p);
                src = p == 0 ? recv : scratch;
                unpack(peerSlot + OneShotLayout.HEADER_WIRE_BYTES, src, bytes, flag, p);
            }
            if (p == 0) {
                if (src != recv && bytes > 0) {
                    UnsafeApi.copyMemory(src, recv, bytes);
                }
            } else {
                Reduction.reduce(type, op, recv, src, recv, count);
            }
        }
        if (op == ReduceOp.AVG) {
            Reduction.divide(type, recv, count, size);
        }
    }

    /**
     * For mismatch diagnosis while some other wait is stuck: copies into {@code into} the header that
     * {@code peer} wrote for call {@code sequence} in either of its slots, if it did; never waits.
     */
    public boolean peekHeader(int peer, int sequence, long into) {
        for (int use = 0; use < OneShotLayout.SLOTS; use++) {
            long at = areas[peer] + layout.slotOffset(use);
            boolean whole = true;
            for (int i = 0; i < OneShotLayout.HEADER_WORDS && whole; i++) {
                long w = UnsafeApi.getLongAcquire(null, at + ((long) i << 3));
                whole = LlLayout.flag(w) == sequence;
                UnsafeApi.putInt(into + ((long) i << 2), LlLayout.data(w));
            }
            if (whole) {
                return true;
            }
        }
        return false;
    }

    private void checkHeader(CollectiveHeader mine, long peerSlot, int peer) {
        unpack(peerSlot, theirHeader, CollectiveHeader.BYTES, mine.sequence, peer);
        for (int i = 0; i < CollectiveHeader.BYTES; i += 4) {
            if (UnsafeApi.getInt(theirHeader + i) != UnsafeApi.getInt(mineHeader + i)) {
                CollectiveHeader theirs = CollectiveHeader.read(theirHeader);
                throw new CclException("rank " + rank + ": collective mismatch: this rank called " + mine.describe()
                        + " but rank " + peer + " called " + (theirs == null ? "something unreadable" : theirs.describe())
                        + "; every rank must make the same collective calls, in the same order, with the same count,"
                        + " type and op");
            }
        }
    }

    /** Writes {@code bytes} at {@code src} as LL words carrying {@code flag} (the last word zero-padded). */
    private static void pack(long src, long dst, long bytes, int flag) {
        long flagBits = (long) flag << 32;
        long whole = bytes >>> 2;
        for (long i = 0; i < whole; i++) {
            UnsafeApi.putLongRelease(null, dst + (i << 3), (UnsafeApi.getInt(src + (i << 2)) & 0xffffffffL) | flagBits);
        }
        int tail = (int) (bytes & 3);
        if (tail != 0) {
            int data = 0;
            for (int b = 0; b < tail; b++) {
                data |= (UnsafeApi.getByte(src + (whole << 2) + b) & 0xff) << (8 * b);
            }
            UnsafeApi.putLongRelease(null, dst + (whole << 3), (data & 0xffffffffL) | flagBits);
        }
    }

    /** Reads {@code bytes} of payload from LL words at {@code src} into {@code dst}, waiting for each word's flag. */
    private void unpack(long src, long dst, long bytes, int flag, int peer) {
        long whole = bytes >>> 2;
        for (long i = 0; i < whole; i++) {
            long w = UnsafeApi.getLongAcquire(null, src + (i << 3));
            if (LlLayout.flag(w) != flag) {
                w = await(src + (i << 3), flag, peer);
            }
            UnsafeApi.putInt(dst + (i << 2), LlLayout.data(w));
        }
        int tail = (int) (bytes & 3);
        if (tail != 0) {
            long w = UnsafeApi.getLongAcquire(null, src + (whole << 3));
            if (LlLayout.flag(w) != flag) {
                w = await(src + (whole << 3), flag, peer);
            }
            int data = LlLayout.data(w);
            for (int b = 0; b < tail; b++) {
                UnsafeApi.putByte(dst + (whole << 2) + b, (byte) (data >>> (8 * b)));
            }
        }
    }

    private long await(long address, int flag, int peer) {
        long w;
        do {
            wait.idle(peer, flag, "one-shot data");
            w = UnsafeApi.getLongAcquire(null, address);
        } while (LlLayout.flag(w) != flag);
        wait.done();
        return w;
    }

    @Override
    public void close() {
        UnsafeApi.freeMemory(scratch);
        UnsafeApi.freeMemory(mineHeader);
    }
}
