package org.sparkccl.core.net;

import java.util.function.Consumer;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.DataType;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.log.CclLog;
import org.sparkccl.core.log.Subsys;
import org.sparkccl.core.proto.CollectiveHeader;
import org.sparkccl.core.reduce.Reduction;

/**
 * The two-level all-reduce that the host and GPU engines share, for L ranks on every host: the count
 * splits into L equal shards and a tail of count mod L elements. Local rank l's shard is reduced inside
 * the host (a reduce-scatter: each local rank ends with 1/L of the host's sum), all-reduced across
 * hosts on the ring of local index l, and all-gathered inside the host; the tail, which does not split,
 * every rank all-reduces whole inside the host and then across. AVG sums at both levels and divides
 * once, after the hop across (as the ring divides once). Each engine supplies its communicator inside
 * the host, the wrapper its in-host calls run in, and the hop {@link Across}; the order of additions is
 * this schedule's alone, so both engines give the same bits.
 */
public final class TwoLevelSchedule {
    /** The hop across hosts, which each engine makes its own way (the GPU one through pinned memory). */
    public interface Across {
        /**
         * All-reduces {@code count} elements at {@code data} in place across hosts, with the caller's
         * {@code op} (AVG: the sum divided by the communicator's size; {@link #acrossHosts} does both).
         */
        void allReduce(long data, long count, DataType type, ReduceOp op);
    }

    private TwoLevelSchedule() {
    }

    /** The op of each level: AVG sums there, and divides once at the end. */
    public static ReduceOp levelOp(ReduceOp op) {
        return op == ReduceOp.AVG ? ReduceOp.SUM : op;
    }

    /**
     * The all-reduce of {@code count} elements for local rank {@code local} of {@code perHost}: the
     * in-host levels on {@code inside}, each run through {@code inHost}; {@code engine} names it in the log.
     */
    public static void allReduce(Communicator inside, Consumer<Runnable> inHost, Across across, int perHost, int local, long send, long recv, long count, DataType type,
                                 ReduceOp op, String engine, CclLog log) {
        int es = type.size();
        long shard = count / perHost;
        long tail = count - shard * perHost;
        ReduceOp levelOp = levelOp(op);
        if (log.infoEnabled(Subsys.COLL)) {
            log.info(Subsys.COLL, "allReduce (count %d, %s, %s) %s: shards of %d over TCP, tail of %d", count,
                    type.ncclName(), op.ncclName(), engine, shard, tail);
        }
        if (shard > 0) {
            long mine = recv + local * shard * es;
            inHost.accept(() -> inside.reduceScatter(send, mine, shard, type, levelOp));
            across.allReduce(mine, shard, type, op);
            inHost.accept(() -> inside.allGather(mine, recv, shard, type));
        }
        if (tail > 0) {
            long at = shard * perHost * es;
            inHost.accept(() -> inside.allReduce(send + at, recv + at, tail, type, levelOp));
            across.allReduce(recv + at, tail, type, op);
        }
    }

    /**
     * The hop across hosts over host memory: {@code count} elements at {@code hostData} all-reduced in
     * place on {@code across} as part of {@code call}; AVG divides the sum by {@code size}, the whole
     * communicator's.
     */
    public static void acrossHosts(SocketCommunicator across, CollectiveHeader call, long hostData, long count,
                                   DataType type, ReduceOp op, int size) {
        across.partOf(call);
        across.allReduce(hostData, hostData, count, type, levelOp(op));
        if (op == ReduceOp.AVG) {
            Reduction.divide(type, hostData, count, size);
        }
    }
}
