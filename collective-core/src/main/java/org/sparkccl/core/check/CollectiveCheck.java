package org.sparkccl.core.check;

import java.io.PrintStream;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.DataType;
import org.sparkccl.core.memory.HostStagingBuffer;
import org.sparkccl.core.ReduceOp;

/**
 * Every collective of a host-memory communicator against {@link ReferenceCheck}, on random data: the
 * all-reduce with every type and op at odd counts, then reduce-scatter, all-gather, broadcast and a
 * barrier. Collective: every rank calls it with the same counts. For tests and for checking a cluster.
 */
public final class CollectiveCheck {
    private final long seed;
    private final PrintStream wrongTo;
    private long cases;
    private long wrong;

    /** {@code wrongTo} gets the first wrong element of each case that has one. */
    public CollectiveCheck(long seed, PrintStream wrongTo) {
        this.seed = seed;
        this.wrongTo = wrongTo;
    }

    /** Runs every case on {@code comm}: every type and op at each of {@code allReduceCounts}, and the others at {@code otherCount}. */
    public CollectiveCheck runAll(Communicator comm, long[] allReduceCounts, long otherCount) {
        for (DataType type : DataType.values()) {
            for (ReduceOp op : ReduceOp.values()) {
                for (long count : allReduceCounts) {
                    allReduce(comm, type, op, count);
                }
            }
        }
        others(comm, DataType.FLOAT32, otherCount);
        return this;
    }

    /** One in-place all-reduce of {@code count} elements, checked. */
    public void allReduce(Communicator comm, DataType type, ReduceOp op, long count) {
        ReferenceCheck check = new ReferenceCheck(type, op, comm.size(), ReferenceCheck.seed(seed, type, op, count));
        try (HostStagingBuffer data = new HostStagingBuffer(Math.max(1, count * type.size()))) {
            check.fillInput(comm.rank(), data.address(), 0, count);
            comm.allReduce(data.address(), data.address(), count, type, op);
            record("allReduce " + type + " " + op + " count " + count, check.checkReduced(data.address(), 0, count));
        }
    }

    /** Reduce-scatter, all-gather and broadcast of {@code count} elements per rank, checked; then a barrier. */
    public void others(Communicator comm, DataType type, long count) {
        int n = comm.size();
        long block = count * type.size();
        ReferenceCheck check = new ReferenceCheck(type, ReduceOp.SUM, n, ReferenceCheck.seed(seed, "others", type, count));
        try (HostStagingBuffer send = new HostStagingBuffer(Math.max(1, block * n));
             HostStagingBuffer recv = new HostStagingBuffer(Math.max(1, block * n))) {
            check.fillInput(comm.rank(), send.address(), 0, count * n);
            comm.reduceScatter(send.address(), recv.address(), count, type, ReduceOp.SUM);
            record("reduceScatter", check.checkReduced(recv.address(), comm.rank() * count, count));
            comm.allGather(send.address(), recv.address(), count, type);
            for (int r = 0; r < n; r++) {
                record("allGather block " + r, check.checkCopy(r, recv.address() + r * block, 0, count));
            }
            int root = n - 1;
            comm.broadcast(send.address(), recv.address(), count, type, root);
            record("broadcast from " + root, check.checkCopy(root, recv.address(), 0, count));
            comm.barrier();
        }
    }

    private void record(String what, ReferenceCheck.Result result) {
        cases++;
        wrong += result.wrong();
        if (result.wrong() != 0 && wrongTo != null) {
            wrongTo.println("rank check: " + what + ": " + result);
        }
    }

    public long cases() {
        return cases;
    }

    /** Wrong elements over every case so far. */
    public long wrong() {
        return wrong;
    }
}
