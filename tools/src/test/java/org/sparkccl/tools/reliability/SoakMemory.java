package org.sparkccl.tools.reliability;

import org.agrona.UnsafeApi;
import org.sparkccl.core.jdk.JdkAccess;
import org.sparkccl.ipc.cuda.CudaStream;
import org.sparkccl.ipc.cuda.DeviceBuffer;

/**
 * Where {@link SoakRank}'s collectives read and write: host memory, which the reference check reads
 * and writes in place, or GPU memory, which it reaches through a host copy. The soak loop works on
 * the buffer's addresses and asks this class for a host view before filling inputs and after a call.
 */
abstract class SoakMemory implements AutoCloseable {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    /** A host address where the input for {@code target} is written; {@link #publish} makes it visible there. */
    abstract long inputView(long target);

    /** Makes the {@code bytes} written at {@link #inputView}(target) the input at {@code target}. */
    abstract void publish(long target, long bytes);

    /** A host address holding the {@code bytes} at {@code source} after the call. */
    abstract long resultView(long source, long bytes);

    @Override
    public abstract void close();

    /** Host memory: the collective and the reference check share the bytes; nothing to copy. */
    static SoakMemory host() {
        return new SoakMemory() {
            @Override
            long inputView(long target) {
                return target;
            }

            @Override
            void publish(long target, long bytes) {
            }

            @Override
            long resultView(long source, long bytes) {
                return source;
            }

            @Override
            public void close() {
            }
        };
    }

    /**
     * Addresses inside {@code buffer} (GPU memory): inputs are written to host scratch and copied up on
     * {@code stream}, results copied down into host scratch; both copies wait for the stream.
     */
    static SoakMemory device(DeviceBuffer buffer, CudaStream stream) {
        long input = UnsafeApi.allocateMemory(buffer.size());
        long output = UnsafeApi.allocateMemory(buffer.size());
        return new SoakMemory() {
            @Override
            long inputView(long target) {
                return input;
            }

            @Override
            void publish(long target, long bytes) {
                buffer.copyFromHost(target - buffer.address(), input, bytes, stream);
            }

            @Override
            long resultView(long source, long bytes) {
                buffer.copyToHost(source - buffer.address(), output, bytes, stream);
                return output;
            }

            @Override
            public void close() {
                UnsafeApi.freeMemory(input);
                UnsafeApi.freeMemory(output);
            }
        };
    }
}
