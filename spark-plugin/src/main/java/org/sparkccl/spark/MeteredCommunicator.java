package org.sparkccl.spark;

import org.sparkccl.core.Communicator;
import org.sparkccl.core.DataType;
import org.sparkccl.core.MemoryKind;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.SharedBuffer;
import org.sparkccl.core.StagingBuffer;

/**
 * A communicator that counts its collectives in {@link CclMetrics}, and that can be closed more than
 * once (the user may close it; the task's completion listener closes it again).
 */
final class MeteredCommunicator implements Communicator {
    private final Communicator inner;
    private boolean closed;

    MeteredCommunicator(Communicator inner) {
        this.inner = inner;
        CclMetrics.communicatorBuilt();
    }

    Communicator inner() {
        return inner;
    }

    @Override
    public int rank() {
        return inner.rank();
    }

    @Override
    public int size() {
        return inner.size();
    }

    @Override
    public MemoryKind memoryKind() {
        return inner.memoryKind();
    }

    @Override
    public void allReduce(long sendAddress, long recvAddress, long count, DataType type, ReduceOp op) {
        long start = System.nanoTime();
        inner.allReduce(sendAddress, recvAddress, count, type, op);
        CclMetrics.collective(count * type.size(), System.nanoTime() - start);
    }

    @Override
    public void reduceScatter(long sendAddress, long recvAddress, long recvCount, DataType type, ReduceOp op) {
        long start = System.nanoTime();
        inner.reduceScatter(sendAddress, recvAddress, recvCount, type, op);
        CclMetrics.collective(recvCount * type.size() * size(), System.nanoTime() - start);
    }

    @Override
    public void allGather(long sendAddress, long recvAddress, long sendCount, DataType type) {
        long start = System.nanoTime();
        inner.allGather(sendAddress, recvAddress, sendCount, type);
        CclMetrics.collective(sendCount * type.size() * size(), System.nanoTime() - start);
    }

    @Override
    public void broadcast(long sendAddress, long recvAddress, long count, DataType type, int root) {
        long start = System.nanoTime();
        inner.broadcast(sendAddress, recvAddress, count, type, root);
        CclMetrics.collective(count * type.size(), System.nanoTime() - start);
    }

    @Override
    public void barrier() {
        long start = System.nanoTime();
        inner.barrier();
        CclMetrics.collective(0, System.nanoTime() - start);
    }

    @Override
    public StagingBuffer allocateStaging(long bytes) {
        return inner.allocateStaging(bytes);
    }

    @Override
    public SharedBuffer allocateShared(long bytes) {
        return inner.allocateShared(bytes);
    }

    @Override
    public synchronized void close() {
        if (!closed) {
            closed = true;
            inner.close();
        }
    }

    synchronized boolean isClosed() {
        return closed;
    }

    @Override
    public String toString() {
        return inner.toString();
    }
}
