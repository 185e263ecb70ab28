package org.sparkccl.tools.perf;

import org.sparkccl.core.DataType;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.ipc.cuda.CudaGraph;
import org.sparkccl.ipc.cuda.CudaStream;
import org.sparkccl.ipc.gpu.GpuCommunicator;

/**
 * nccl-tests' {@code -z 0} on GPUs: all-reduces queued back to back on a CUDA stream of this rank
 * (stream-ordered calls, each returns at once), then waited for once; and its {@code -G}: the same
 * calls captured in a CUDA graph and replayed.
 */
final class QueuedGpuCalls implements AutoCloseable {
    private final GpuCommunicator comm;
    private final CudaStream stream;

    QueuedGpuCalls(GpuCommunicator comm) {
        this.comm = comm;
        this.stream = new CudaStream(comm.device(), "allreduce-perf rank " + comm.rank());
    }

    void allReduce(long send, long recv, long count, DataType type, ReduceOp op) {
        comm.allReduce(send, recv, count, type, op, stream);
    }

    /**
     * nccl-tests' {@code -G}: what {@code calls} queues is captured in a CUDA graph (untimed), every rank
     * meets at {@code barrier} (instantiating may wait for the GPU, so for a peer's kernel where ranks share
     * one), the graph runs once untimed, then {@code launches} times back to back with one wait: returns
     * the nanoseconds of those launches and the wait.
     */
    long graphed(Runnable calls, int launches, Runnable barrier) {
        try (CudaGraph graph = CudaGraph.capture(stream, calls::run, "allreduce-perf rank " + comm.rank())) {
            barrier.run();
            graph.launch(stream);
            synchronize();
            barrier.run();
            long t0 = System.nanoTime();
            for (int i = 0; i < launches; i++) {
                graph.launch(stream);
            }
            synchronize();
            return System.nanoTime() - t0;
        }
    }

    /** Returns when every queued call has ended; throws if one failed. */
    void synchronize() {
        comm.synchronize(stream);
    }

    @Override
    public void close() {
        stream.close();
    }
}
