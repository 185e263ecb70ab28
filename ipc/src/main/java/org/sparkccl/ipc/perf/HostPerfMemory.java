package org.sparkccl.ipc.perf;

import org.agrona.UnsafeApi;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.DataType;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.check.ReferenceCheck;

/** Benchmark buffers in plain off-heap host memory (the CPU engine). */
final class HostPerfMemory implements PerfMemory {
    private final long send;
    private final long recv;
    private final long scalar;

    HostPerfMemory(long bytes) {
        send = UnsafeApi.allocateMemory(bytes);
        recv = UnsafeApi.allocateMemory(bytes);
        scalar = UnsafeApi.allocateMemory(8);
        UnsafeApi.setMemory(send, bytes, (byte) 0);
        UnsafeApi.setMemory(recv, bytes, (byte) 0);
    }

    @Override
    public long send() {
        return send;
    }

    @Override
    public long recv() {
        return recv;
    }

    @Override
    public void fill(ReferenceCheck data, int rank, long target, long count) {
        data.fillInput(rank, target, 0, count);
    }

    @Override
    public ReferenceCheck.Result check(ReferenceCheck reference, long target, long count) {
        return reference.checkReduced(target, 0, count);
    }

    @Override
    public long allReduceBits(Communicator comm, long bits, DataType type, ReduceOp op) {
        UnsafeApi.putLong(scalar, bits);
        comm.allReduce(scalar, scalar, 1, type, op);
        return UnsafeApi.getLong(scalar);
    }

    @Override
    public void close() {
        UnsafeApi.freeMemory(send);
        UnsafeApi.freeMemory(recv);
        UnsafeApi.freeMemory(scalar);
    }
}
