package org.sparkccl.tools.perf;

import org.agrona.UnsafeApi;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.DataType;
import org.sparkccl.core.jdk.JdkAccess;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.check.ReferenceCheck;
import org.sparkccl.ipc.cuda.DeviceBuffer;
import org.sparkccl.ipc.cuda.CudaDevice;
import org.sparkccl.ipc.cuda.CudaStream;

/**
 * Benchmark buffers in GPU memory: checked inputs are made in host memory and copied up, results
 * copied down before they are compared; the timed calls touch device memory only.
 */
final class DevicePerfMemory implements PerfMemory {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    private final CudaStream stream;
    private final DeviceBuffer send;
    private final DeviceBuffer recv;
    private final DeviceBuffer scalar;
    private final long host;

    /** Buffers on {@code device}; the copies run on {@code stream} (the communicator's). */
    DevicePerfMemory(CudaDevice device, CudaStream stream, long bytes) {
        this.stream = stream;
        DeviceBuffer s = null;
        DeviceBuffer r = null;
        DeviceBuffer one = null;
        try {
            s = DeviceBuffer.allocate(device, bytes, "allreduce-perf send");
            r = DeviceBuffer.allocate(device, bytes, "allreduce-perf recv");
            one = DeviceBuffer.allocate(device, 8, "allreduce-perf scalar");
        } catch (RuntimeException e) {
            for (DeviceBuffer b : new DeviceBuffer[] {s, r, one}) {
                if (b != null) {
                    b.close();
                }
            }
            throw e;
        }
        this.send = s;
        this.recv = r;
        this.scalar = one;
        this.host = UnsafeApi.allocateMemory(bytes);
    }

    @Override
    public long send() {
        return send.address();
    }

    @Override
    public long recv() {
        return recv.address();
    }

    @Override
    public void fill(ReferenceCheck data, int rank, long target, long count) {
        long bytes = count * data.type().size();
        data.fillInput(rank, host, 0, count);
        buffer(target).copyFromHost(0, host, bytes, stream);
    }

    @Override
    public ReferenceCheck.Result check(ReferenceCheck reference, long target, long count) {
        buffer(target).copyToHost(0, host, count * reference.type().size(), stream);
        return reference.checkReduced(host, 0, count);
    }

    @Override
    public long allReduceBits(Communicator c, long bits, DataType type, ReduceOp op) {
        UnsafeApi.putLong(host, bits);
        scalar.copyFromHost(0, host, 8, stream);
        c.allReduce(scalar.address(), scalar.address(), 1, type, op);
        scalar.copyToHost(0, host, 8, stream);
        return UnsafeApi.getLong(host);
    }

    private DeviceBuffer buffer(long target) {
        return target == send.address() ? send : recv;
    }

    @Override
    public void close() {
        send.close();
        recv.close();
        scalar.close();
        UnsafeApi.freeMemory(host);
    }
}
