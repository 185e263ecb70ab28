package org.sparkccl.core.oneshot;

import org.agrona.UnsafeApi;
import org.sparkccl.core.CclException;
import org.sparkccl.core.DataType;
import org.sparkccl.core.jdk.JdkAccess;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.copy.BulkCopy;
import org.sparkccl.core.proto.CollectiveHeader;
import org.sparkccl.core.proto.OneShotLayout;
import org.sparkccl.core.reduce.Reduction;
import org.sparkccl.core.wait.WaitLoop;

/**
 * All-reduce of small messages in one exchange: each rank writes its collective header and its whole
 * input into a slot of its own segment and publishes it with one flag ({@link OneShotLayout}), then
 * reads every peer's slot and reduces all n inputs itself, in rank order 0, 1, ..., n-1, so that
 * every rank computes the same operations on the same values and ends with the same bits. The ring
 * needs a header exchange and 2(n-1) dependent steps; this needs one, at the price of every rank
 * reading all n-1 peers' inputs, which is cheap only while messages are small.
 *
 * <p><b>Why two slots, used in turn, are safe to overwrite.</b> Rank r writes slot u % 2 in its
 * one-shot call u and writes it again only in call u + 2. Every rank makes the same one-shot calls
 * in the same order (the tuner decides from the call alone, and a call that differs fails at the
 * header check). Before r can start call u + 2 it must finish call u + 1, which means acquiring
 * every peer p's call-(u + 1) flag; p releases that flag only after it has returned from call u,
 * that is after its last read of r's call-u slot (program order, and the release store orders p's
 * earlier reads before it; r's acquire orders its later writes after it). So no peer can still be
 * reading slot u % 2 when r overwrites it: a rank is at most one one-shot call ahead of any peer.
 * The flag is the call's sequence number, so a reader never takes the previous use (or zeroed
 * memory) for the current one.
 *
 * <p>Not thread safe: the communicator's calling thread runs it.
 */
public final class OneShotAllReduce {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    private final int rank;
    private final int size;
    private final OneShotLayout layout;
    /** Address of each rank's one-shot area (this rank's own included), as mapped in this process. */
    private final long[] areas;
    private final WaitLoop wait;
    private long uses;

    public OneShotAllReduce(int rank, int size, OneShotLayout layout, long[] areas, WaitLoop wait) {
        this.rank = rank;
        this.size = size;
        this.layout = layout;
        this.areas = areas.clone();
        this.wait = wait;
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
        mine.write(own + OneShotLayout.HEADER_OFFSET);
        if (bytes > 0) {
            BulkCopy.copy(send, own + OneShotLayout.DATA_OFFSET, bytes);
        }
        UnsafeApi.putIntRelease(null, own + OneShotLayout.FLAG_OFFSET, flag); // publishes header and data

        for (int p = 0; p < size; p++) {
            long src;
            if (p == rank) {
                // In place, peer 0's input has replaced ours in recv by now, but ours is in our slot.
                src = send != recv || p == 0 ? send : own + OneShotLayout.DATA_OFFSET;
            } else {
                long peerSlot = areas[p] + slot;
                awaitFlag(peerSlot + OneShotLayout.FLAG_OFFSET, flag, p);
                checkHeader(mine, own + OneShotLayout.HEADER_OFFSET, peerSlot + OneShotLayout.HEADER_OFFSET, p);
                src = peerSlot + OneShotLayout.DATA_OFFSET;
            }
            if (p == 0) {
                if (src != recv && bytes > 0) {
                    BulkCopy.copy(src, recv, bytes);
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
     * {@code peer} published for call {@code sequence} in either of its slots, if it did; never waits.
     */
    public boolean peekHeader(int peer, int sequence, long into) {
        for (int use = 0; use < OneShotLayout.SLOTS; use++) {
            long at = areas[peer] + layout.slotOffset(use);
            if (UnsafeApi.getIntAcquire(null, at + OneShotLayout.FLAG_OFFSET) == sequence) {
                UnsafeApi.copyMemory(at + OneShotLayout.HEADER_OFFSET, into, CollectiveHeader.BYTES);
                return true;
            }
        }
        return false;
    }

    private void checkHeader(CollectiveHeader mine, long mineAt, long theirsAt, int peer) {
        if (!CollectiveHeader.sameBytes(mineAt, theirsAt)) {
            CollectiveHeader theirs = CollectiveHeader.read(theirsAt);
            throw new CclException("rank " + rank + ": collective mismatch: this rank called " + mine.describe()
                    + " but rank " + peer + " called " + (theirs == null ? "something unreadable" : theirs.describe())
                    + "; every rank must make the same collective calls, in the same order, with the same count,"
                    + " type and op");
        }
    }

    private void awaitFlag(long address, int flag, int peer) {
        if (UnsafeApi.getIntAcquire(null, address) != flag) {
            do {
                wait.idle(peer, flag, "one-shot data");
            } while (UnsafeApi.getIntAcquire(null, address) != flag);
            wait.done();
        }
    }
}
