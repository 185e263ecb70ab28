package org.sparkccl.core.proto;

import org.agrona.UnsafeApi;
import org.sparkccl.core.DataType;
import org.sparkccl.core.jdk.JdkAccess;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.copy.BulkCopy;
import org.sparkccl.core.reduce.Reduction;

/**
 * Simple on the CPU ({@link ChannelLayout}): raw data in a FIFO of STEPS slots, published with a
 * release store of the tail and freed with a release store of the head. A reduce step reads the
 * predecessor's slot and this rank's data, reduces them block by block into a small buffer of its
 * own that stays in cache, and copies each block into the successor's slot. Every write into a
 * slot goes through {@link BulkCopy}: the successor has read those lines in the previous round.
 */
public final class SimplePrimitives implements Primitives, AutoCloseable {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    /**
     * Reduce-then-copy granularity inside a slot; a multiple of every element size. 32 KB: the
     * smallest copy BulkCopy hands to libc, and the block is still in L1 or L2 when copied.
     */
    private static final int COPY_BLOCK_BYTES = (int) BulkCopy.NATIVE_MIN_BYTES;
    private final Connection c;
    private final int slotBytes;
    private final long recvBase;
    private final long sendBase;
    private DataType type = DataType.UINT8;
    private ReduceOp op = ReduceOp.SUM;
    private int nranks = 1;
    /** One reduced block on its way into the successor's slot (recvReduceSend). */
    private final long block = UnsafeApi.allocateMemory(COPY_BLOCK_BYTES);

    public SimplePrimitives(Connection connection) {
        this.c = connection;
        this.slotBytes = connection.layout.simpleSlotBytes();
        this.recvBase = connection.recvBuffer.addressOffset() + connection.recvBase;
        this.sendBase = connection.sendBuffer.addressOffset() + connection.sendBase;
    }

    @Override
    public void begin(DataType type, ReduceOp op, int nranks) {
        this.type = type;
        this.op = op;
        this.nranks = nranks;
    }

    @Override
    public void send(long src, long bytes) {
        for (long done = 0; done < bytes; done += slotBytes) {
            int n = piece(bytes, done);
            long slot = acquireSendSlot();
            BulkCopy.copy(src + done, slot, n);
            publishSend();
        }
    }

    @Override
    public void recv(long dst, long bytes) {
        for (long done = 0; done < bytes; done += slotBytes) {
            int n = piece(bytes, done);
            long slot = acquireRecvSlot();
            BulkCopy.copy(slot, dst + done, n);
            releaseRecv();
        }
    }

    @Override
    public void recvReduceSend(long src, long bytes) {
        for (long done = 0; done < bytes; done += slotBytes) {
            int n = piece(bytes, done);
            long in = acquireRecvSlot();
            long out = acquireSendSlot();
            int es = type.size();
            for (int at = 0; at < n; at += COPY_BLOCK_BYTES) {
                int m = Math.min(COPY_BLOCK_BYTES, n - at);
                Reduction.reduce(type, op, in + at, src + done + at, block, m / es);
                BulkCopy.copy(block, out + at, m);
            }
            publishSend();
            releaseRecv();
        }
    }

    @Override
    public void recvReduceCopySend(long src, long dst, long bytes, boolean finish) {
        for (long done = 0; done < bytes; done += slotBytes) {
            int n = piece(bytes, done);
            long in = acquireRecvSlot();
            long out = acquireSendSlot();
            int es = type.size();
            // Block by block, so that each block is copied to the successor while it is still in L1
            // rather than read back from L2 after the whole slot was reduced.
            for (int at = 0; at < n; at += COPY_BLOCK_BYTES) {
                int m = Math.min(COPY_BLOCK_BYTES, n - at);
                long d = dst + done + at;
                Reduction.reduce(type, op, in + at, src + done + at, d, m / es);
                if (finish && op == ReduceOp.AVG) {
                    Reduction.divide(type, d, m / es, nranks);
                }
                BulkCopy.copy(d, out + at, m);
            }
            releaseRecv();
            publishSend();
        }
    }

    @Override
    public void recvReduceCopy(long src, long dst, long bytes, boolean finish) {
        for (long done = 0; done < bytes; done += slotBytes) {
            reduceInto(src + done, dst + done, piece(bytes, done), finish);
        }
    }

    @Override
    public void recvCopySend(long dst, long bytes) {
        for (long done = 0; done < bytes; done += slotBytes) {
            int n = piece(bytes, done);
            long in = acquireRecvSlot();
            long out = acquireSendSlot();
            BulkCopy.copy(in, out, n);
            publishSend();
            BulkCopy.copy(in, dst + done, n);
            releaseRecv();
        }
    }

    private void reduceInto(long src, long dst, int n, boolean finish) {
        long in = acquireRecvSlot();
        long count = n / type.size();
        Reduction.reduce(type, op, in, src, dst, count);
        releaseRecv();
        if (finish && op == ReduceOp.AVG) {
            Reduction.divide(type, dst, count, nranks);
        }
    }

    @Override
    public void close() {
        UnsafeApi.freeMemory(block);
    }

    public int slotBytes() {
        return slotBytes;
    }

    private int piece(long bytes, long done) {
        return (int) Math.min(slotBytes, bytes - done);
    }

    /** Address of the successor's slot for the next send step, once it is free. */
    private long acquireSendSlot() {
        long step = c.simpleSendStep;
        c.waitForFreeSlot(ChannelLayout.SIMPLE_HEAD_OFFSET, step, "a free Simple slot");
        return sendBase + c.layout.simpleSlotOffset(step);
    }

    private void publishSend() {
        long step = c.simpleSendStep;
        c.sendBuffer.putLongRelease(c.sendBase + ChannelLayout.SIMPLE_TAIL_OFFSET, step + 1);
        c.simpleSendStep = step + 1;
    }

    /** Address of this rank's slot for the next receive step, once the predecessor published it. */
    private long acquireRecvSlot() {
        long step = c.simpleRecvStep;
        int at = c.recvBase + ChannelLayout.SIMPLE_TAIL_OFFSET;
        if (c.recvBuffer.getLongAcquire(at) <= step) {
            while (c.recvBuffer.getLongAcquire(at) <= step) {
                c.wait.idle(c.prevRank, step, "Simple data");
            }
            c.wait.done();
        }
        return recvBase + c.layout.simpleSlotOffset(step);
    }

    private void releaseRecv() {
        long step = c.simpleRecvStep;
        c.recvBuffer.putLongRelease(c.recvBase + ChannelLayout.SIMPLE_HEAD_OFFSET, step + 1);
        c.simpleRecvStep = step + 1;
    }
}
