package org.sparkccl.tools.perf;

import org.sparkccl.core.DataType;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.ipc.cuda.CudaStream;
import org.sparkccl.ipc.gpu.GpuCommunicator;

/**
 * nccl-tests' {@code -z 0} on GPUs: all-reduces queued back to back on a CUDA stream of this rank
 * (stream-ordered calls, each returns at once), then waited for once.
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

    /** Returns when every queued call has ended; throws if one failed. */
    void synchronize() {
        comm.synchronize(stream);
    }

    @Override
    public void close() {
        stream.close();
    }
}
