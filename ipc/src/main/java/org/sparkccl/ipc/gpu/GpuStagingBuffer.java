package org.sparkccl.ipc.gpu;

import java.util.function.Consumer;
import org.sparkccl.core.StagingBuffer;
import org.sparkccl.ipc.cuda.CudaStream;
import org.sparkccl.ipc.cuda.DeviceBuffer;

/** Device memory lent by a {@link GpuCommunicator} for one array collective; closing gives it back. */
final class GpuStagingBuffer implements StagingBuffer {
    private final DeviceBuffer buffer;
    private final long size;
    private final CudaStream stream;
    private final Consumer<DeviceBuffer> giveBack;
    private boolean closed;

    GpuStagingBuffer(DeviceBuffer buffer, long size, CudaStream stream, Consumer<DeviceBuffer> giveBack) {
        this.buffer = buffer;
        this.size = size;
        this.stream = stream;
        this.giveBack = giveBack;
    }

    @Override
    public long address() {
        return buffer.address();
    }

    @Override
    public long size() {
        return size;
    }

    @Override
    public void copyIn(Object javaArray, long bytes) {
        checkSize(bytes);
        if (bytes > 0) {
            buffer.device().makeCurrent();
            buffer.copyFromArray(javaArray, bytes, stream);
        }
    }

    @Override
    public void copyOut(Object javaArray, long bytes) {
        checkSize(bytes);
        if (bytes > 0) {
            buffer.device().makeCurrent();
            buffer.copyToArray(javaArray, bytes, stream);
        }
    }

    private void checkSize(long bytes) {
        if (bytes > size) {
            throw new IndexOutOfBoundsException(bytes + " bytes do not fit a staging buffer of " + size);
        }
    }

    @Override
    public void close() {
        if (!closed) {
            closed = true;
            giveBack.accept(buffer);
        }
    }
}
