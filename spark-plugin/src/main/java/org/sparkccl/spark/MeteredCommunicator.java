package org.sparkccl.spark;

import org.sparkccl.core.Communicator;
import org.sparkccl.core.DataType;
import org.sparkccl.core.MemoryKind;
import org.sparkccl.core.PeerFailedException;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.SharedBuffer;
import org.sparkccl.core.StagingBuffer;

/**
 * A communicator that counts its collectives in {@link CclMetrics}, that can be closed more than
 * once (the user may close it; the task's completion listener closes it again), and whose
 * {@link PeerFailedException}s say what Spark does next with the stage ({@link StageRetry}): the
 * engines know nothing of Spark.
 */
final class MeteredCommunicator implements Communicator {
    private final Communicator inner;
    private final StageRetry stage;
    private boolean closed;

    MeteredCommunicator(Communicator inner, StageRetry stage) {
        this.inner = inner;
        this.stage = stage;
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
    public String layout() {
        return inner.layout();
    }

    @Override
    public void allReduce(long sendAddress, long recvAddress, long count, DataType type, ReduceOp op) {
        long start = System.nanoTime();
        try {
            inner.allReduce(sendAddress, recvAddress, count, type, op);
        } catch (PeerFailedException e) {
            throw stage.explain(e);
        }
        CclMetrics.collective(count * type.size(), System.nanoTime() - start);
    }

    @Override
    public void reduceScatter(long sendAddress, long recvAddress, long recvCount, DataType type, ReduceOp op) {
        long start = System.nanoTime();
        try {
            inner.reduceScatter(sendAddress, recvAddress, recvCount, type, op);
        } catch (PeerFailedException e) {
            throw stage.explain(e);
        }
        CclMetrics.collective(recvCount * type.size() * size(), System.nanoTime() - start);
    }

    @Override
    public void allGather(long sendAddress, long recvAddress, long sendCount, DataType type) {
        long start = System.nanoTime();
        try {
            inner.allGather(sendAddress, recvAddress, sendCount, type);
        } catch (PeerFailedException e) {
            throw stage.explain(e);
        }
        CclMetrics.collective(sendCount * type.size() * size(), System.nanoTime() - start);
    }

    @Override
    public void broadcast(long sendAddress, long recvAddress, long count, DataType type, int root) {
        long start = System.nanoTime();
        try {
            inner.broadcast(sendAddress, recvAddress, count, type, root);
        } catch (PeerFailedException e) {
            throw stage.explain(e);
        }
        CclMetrics.collective(count * type.size(), System.nanoTime() - start);
    }

    @Override
    public void barrier() {
        long start = System.nanoTime();
        try {
            inner.barrier();
        } catch (PeerFailedException e) {
            throw stage.explain(e);
        }
        CclMetrics.collective(0, System.nanoTime() - start);
    }

    @Override
    public StagingBuffer allocateStaging(long bytes) {
        try {
            return inner.allocateStaging(bytes);
        } catch (PeerFailedException e) {
            throw stage.explain(e);
        }
    }

    @Override
    public boolean canAllocateShared() {
        return inner.canAllocateShared();
    }

    @Override
    public SharedBuffer allocateShared(long bytes) {
        try {
            return inner.allocateShared(bytes);
        } catch (PeerFailedException e) {
            throw stage.explain(e);
        }
    }

    @Override
    public synchronized void abort(String reason) {
        if (!closed) {
            inner.abort(reason);
        }
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
