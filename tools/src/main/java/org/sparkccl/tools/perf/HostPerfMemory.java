package org.sparkccl.tools.perf;

import org.agrona.UnsafeApi;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.DataType;
import org.sparkccl.core.jdk.JdkAccess;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.SharedBuffer;
import org.sparkccl.core.check.ReferenceCheck;

/**
 * Benchmark buffers in host memory (the CPU engine): plain off-heap memory, or with {@code -R 1}
 * one shared buffer that every rank maps ({@link Communicator#allocateShared}), as nccl-tests'
 * {@code -R} registers its buffers.
 */
final class HostPerfMemory implements PerfMemory {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    /** Between send and receive in a shared buffer, so that they never share a page. */
    private static final long GAP = 4096;

    private final long send;
    private final long recv;
    private final long scalar;
    /** The shared buffer holding send and recv, or null for plain memory. */
    private final SharedBuffer shared;

    HostPerfMemory(Communicator comm, long bytes, boolean registered) {
        if (registered) {
            long stride = (bytes + GAP - 1) / GAP * GAP;
            shared = comm.allocateShared(2 * stride);
            send = shared.address();
            recv = shared.address() + stride;
        } else {
            shared = null;
            send = UnsafeApi.allocateMemory(bytes);
            recv = UnsafeApi.allocateMemory(bytes);
        }
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
        if (shared != null) {
            shared.close();
        } else {
            UnsafeApi.freeMemory(send);
            UnsafeApi.freeMemory(recv);
        }
        UnsafeApi.freeMemory(scalar);
    }
}
