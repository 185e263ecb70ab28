package org.sparkccl.core.proto;

import org.agrona.UnsafeApi;
import org.sparkccl.core.DataType;
import org.sparkccl.core.jdk.JdkAccess;
import org.sparkccl.core.ReduceOp;

/**
 * The first line of every collective on every channel, always sent with LL whatever the protocol:
 * a rank compares its predecessor's header with its own call and fails at once on a difference,
 * so ranks that disagree (count, type, op, collective, root, protocol) never hang.
 *
 * <pre>
 *  int 0  sequence number   int 1  collective kind   int 2  data type   int 3  op
 *  int 4  protocol          int 5  root              int 6-7 count (long, low word first)
 * </pre>
 */
public final class CollectiveHeader {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    public static final int BYTES = 32;

    public enum Kind { ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, BROADCAST, BARRIER }

    public final int sequence;
    public final Kind kind;
    public final DataType type;
    public final ReduceOp op;
    public final Protocol protocol;
    public final int root;
    public final long count;

    public CollectiveHeader(int sequence, Kind kind, DataType type, ReduceOp op, Protocol protocol, int root, long count) {
        this.sequence = sequence;
        this.kind = kind;
        this.type = type;
        this.op = op;
        this.protocol = protocol;
        this.root = root;
        this.count = count;
    }

    public void write(long address) {
        UnsafeApi.putInt(address, sequence);
        UnsafeApi.putInt(address + 4, kind.ordinal());
        UnsafeApi.putInt(address + 8, type.ordinal());
        UnsafeApi.putInt(address + 12, op.ordinal());
        UnsafeApi.putInt(address + 16, protocol.ordinal());
        UnsafeApi.putInt(address + 20, root);
        UnsafeApi.putLong(address + 24, count);
    }

    /** Reads a header; returns null when the bytes are not a valid header (garbage or another version). */
    public static CollectiveHeader read(long address) {
        int kind = UnsafeApi.getInt(address + 4);
        int type = UnsafeApi.getInt(address + 8);
        int op = UnsafeApi.getInt(address + 12);
        int protocol = UnsafeApi.getInt(address + 16);
        if (kind < 0 || kind >= Kind.values().length || type < 0 || type >= DataType.values().length
                || op < 0 || op >= ReduceOp.values().length || protocol < 0 || protocol >= Protocol.values().length) {
            return null;
        }
        return new CollectiveHeader(UnsafeApi.getInt(address), Kind.values()[kind], DataType.values()[type],
                ReduceOp.values()[op], Protocol.values()[protocol], UnsafeApi.getInt(address + 20),
                UnsafeApi.getLong(address + 24));
    }

    /** Whether the headers written at {@code a} and {@code b} are the same bytes (read without building either). */
    public static boolean sameBytes(long a, long b) {
        for (int i = 0; i < BYTES; i += 4) {
            if (UnsafeApi.getInt(a + i) != UnsafeApi.getInt(b + i)) {
                return false;
            }
        }
        return true;
    }

    public boolean sameCall(CollectiveHeader o) {
        return o != null && sequence == o.sequence && kind == o.kind && type == o.type && op == o.op
                && protocol == o.protocol && root == o.root && count == o.count;
    }

    /** E.g. {@code allReduce #5 (count 1024, float, sum, proto Simple)}. */
    public String describe() {
        String name;
        switch (kind) {
            case ALL_REDUCE: name = "allReduce"; break;
            case REDUCE_SCATTER: name = "reduceScatter"; break;
            case ALL_GATHER: name = "allGather"; break;
            case BROADCAST: name = "broadcast"; break;
            default: name = "barrier"; break;
        }
        StringBuilder b = new StringBuilder(name).append(" #").append(sequence).append(" (count ").append(count)
                .append(", ").append(type.ncclName());
        if (kind == Kind.ALL_REDUCE || kind == Kind.REDUCE_SCATTER) {
            b.append(", ").append(op.ncclName());
        }
        if (kind == Kind.BROADCAST) {
            b.append(", root ").append(root);
        }
        return b.append(", proto ").append(protocol.displayName()).append(')').toString();
    }

    @Override
    public String toString() {
        return describe();
    }
}
