package org.sparkccl.core.proto;

import org.agrona.UnsafeApi;
import org.agrona.concurrent.AtomicBuffer;
import org.sparkccl.core.DataType;
import org.sparkccl.core.jdk.JdkAccess;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.reduce.Reduction;

/**
 * LL on the CPU ({@link LlLayout}): every 4 bytes of payload travel with a flag in one 8-byte
 * release store; the reader polls each word until its flag is the step's. Incoming words are
 * unpacked into a scratch slot (cache resident) before they are reduced, so that one reduction
 * routine serves every type, elements of 8 bytes included.
 */
public final class LlPrimitives implements Primitives, AutoCloseable {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    private final Connection c;
    private final int slotData;
    private final long scratch;
    private DataType type = DataType.UINT8;
    private ReduceOp op = ReduceOp.SUM;
    private int nranks = 1;

    public LlPrimitives(Connection connection) {
        this.c = connection;
        this.slotData = connection.layout.llSlotDataBytes();
        this.scratch = UnsafeApi.allocateMemory(slotData);
    }

    @Override
    public void begin(DataType type, ReduceOp op, int nranks) {
        this.type = type;
        this.op = op;
        this.nranks = nranks;
    }

    @Override
    public void send(long src, long bytes) {
        for (long done = 0; done < bytes; done += slotData) {
            writeSlot(src + done, piece(bytes, done));
        }
    }

    @Override
    public void recv(long dst, long bytes) {
        for (long done = 0; done < bytes; done += slotData) {
            readSlot(dst + done, piece(bytes, done));
        }
    }

    @Override
    public void recvReduceSend(long src, long bytes) {
        for (long done = 0; done < bytes; done += slotData) {
            int n = piece(bytes, done);
            readSlot(scratch, n);
            Reduction.reduce(type, op, scratch, src + done, scratch, n / type.size());
            writeSlot(scratch, n);
        }
    }

    @Override
    public void recvReduceCopySend(long src, long dst, long bytes, boolean finish) {
        for (long done = 0; done < bytes; done += slotData) {
            int n = piece(bytes, done);
            reduceInto(src + done, dst + done, n, finish);
            writeSlot(dst + done, n);
        }
    }

    @Override
    public void recvReduceCopy(long src, long dst, long bytes, boolean finish) {
        for (long done = 0; done < bytes; done += slotData) {
            reduceInto(src + done, dst + done, piece(bytes, done), finish);
        }
    }

    @Override
    public void recvCopySend(long dst, long bytes) {
        for (long done = 0; done < bytes; done += slotData) {
            int n = piece(bytes, done);
            readSlot(dst + done, n);
            writeSlot(dst + done, n);
        }
    }

    private void reduceInto(long src, long dst, int n, boolean finish) {
        readSlot(scratch, n);
        long count = n / type.size();
        Reduction.reduce(type, op, scratch, src, dst, count);
        if (finish && op == ReduceOp.AVG) {
            Reduction.divide(type, dst, count, nranks);
        }
    }

    private int piece(long bytes, long done) {
        return (int) Math.min(slotData, bytes - done);
    }

    /** Packs {@code n} bytes at {@code src} into the successor's next LL slot. */
    void writeSlot(long src, int n) {
        long step = c.llSendStep;
        c.waitForFreeSlot(ChannelLayout.LL_HEAD_OFFSET, step, "a free LL slot");
        AtomicBuffer out = c.sendBuffer;
        int at = c.sendBase + c.layout.llSlotOffset(step);
        int flag = LlLayout.flagOfStep(step);
        int whole = n >>> 2;
        for (int i = 0; i < whole; i++) {
            out.putLongRelease(at + i * LlLayout.WORD_BYTES, LlLayout.word(UnsafeApi.getInt(src + ((long) i << 2)), flag));
        }
        int tail = n & 3;
        if (tail != 0) {
            int data = 0;
            for (int b = 0; b < tail; b++) {
                data |= (UnsafeApi.getByte(src + ((long) whole << 2) + b) & 0xff) << (8 * b);
            }
            out.putLongRelease(at + whole * LlLayout.WORD_BYTES, LlLayout.word(data, flag));
        }
        c.llSendStep = step + 1;
    }

    /** Waits for the predecessor's next LL slot, unpacks {@code n} bytes into {@code dst}, frees the slot. */
    void readSlot(long dst, int n) {
        long step = c.llRecvStep;
        AtomicBuffer in = c.recvBuffer;
        int at = c.recvBase + c.layout.llSlotOffset(step);
        int flag = LlLayout.flagOfStep(step);
        int words = (n + 3) >>> 2;
        for (int i = 0; i < words; i++) {
            int wordAt = at + i * LlLayout.WORD_BYTES;
            long w = in.getLongAcquire(wordAt);
            if (LlLayout.flag(w) != flag) {
                do {
                    c.wait.idle(c.prevRank, step, "LL data");
                    w = in.getLongAcquire(wordAt);
                } while (LlLayout.flag(w) != flag);
                c.wait.done();
            }
            int data = LlLayout.data(w);
            long to = dst + ((long) i << 2);
            int bytesHere = Math.min(4, n - (i << 2));
            if (bytesHere == 4) {
                UnsafeApi.putInt(to, data);
            } else {
                for (int b = 0; b < bytesHere; b++) {
                    UnsafeApi.putByte(to + b, (byte) (data >>> (8 * b)));
                }
            }
        }
        in.putLongRelease(c.recvBase + ChannelLayout.LL_HEAD_OFFSET, step + 1);
        c.llRecvStep = step + 1;
    }

    /**
     * Sends this rank's 32-byte collective header to the successor and receives the predecessor's:
     * always LL, whatever protocol the collective then uses, so a protocol mismatch is caught too.
     */
    public void exchangeHeader(long mine, long theirs) {
        writeSlot(mine, CollectiveHeader.BYTES);
        readSlot(theirs, CollectiveHeader.BYTES);
    }

    /**
     * For mismatch diagnosis while another wait is stuck: whether the predecessor's next LL slot
     * already holds a whole collective header, which is then copied to {@code into}. Consumes
     * nothing and never waits.
     */
    public boolean peekHeader(long into) {
        long step = c.llRecvStep;
        int at = c.recvBase + c.layout.llSlotOffset(step);
        int flag = LlLayout.flagOfStep(step);
        for (int i = 0; i < CollectiveHeader.BYTES / LlLayout.DATA_BYTES_PER_WORD; i++) {
            long w = c.recvBuffer.getLongAcquire(at + i * LlLayout.WORD_BYTES);
            if (LlLayout.flag(w) != flag) {
                return false;
            }
            UnsafeApi.putInt(into + ((long) i << 2), LlLayout.data(w));
        }
        return true;
    }

    /** Bytes of payload one slot carries. */
    public int slotDataBytes() {
        return slotData;
    }

    @Override
    public void close() {
        UnsafeApi.freeMemory(scratch);
    }
}
