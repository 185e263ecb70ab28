package org.sparkccl.ipc.cuda;

import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Something CUDA gave this process (memory, a mapping, a stream, an event, a graph) that must go back
 * exactly once. {@link #close} may be called any number of times, from any thread: the first call makes
 * the device current, takes the bytes off their counter and calls {@link #release}; later calls do
 * nothing. The resource counts as closed from that first call on, even if the release fails (CUDA
 * would not take it back a second time either).
 *
 * <p>Counted resources add their bytes to a process-wide counter when they are made and take them off
 * when they are closed, so that tests can assert that what a communicator allocated went back
 * ({@code DeviceBuffer.outstandingBytes()} and the like return to 0).
 *
 * <p>{@code close} holds this object's lock while it releases, as the classes did before they shared
 * this base: a subclass method that must not run against a half-released resource (exporting a handle)
 * is {@code synchronized} and starts with {@link #checkOpen}.
 */
public abstract class NativeResource implements AutoCloseable {
    /** The device made current for the release; null where there is nothing to release. */
    private final CudaDevice device;
    /** Where {@link #countedBytes} are counted, or null. */
    private final AtomicLong counter;
    private final long countedBytes;
    private final AtomicBoolean closed = new AtomicBoolean();

    /** A resource of {@code device}, not counted. */
    protected NativeResource(CudaDevice device) {
        this(device, null, 0);
    }

    /**
     * A resource of {@code device} whose {@code bytes} count in {@code counter} (null: not counted) until
     * it is closed. A null {@code device}: the object holds nothing to release (a host range another
     * owner registered), so close only marks it closed.
     */
    protected NativeResource(CudaDevice device, AtomicLong counter, long bytes) {
        this.device = device;
        this.counter = counter;
        this.countedBytes = bytes;
        if (counter != null) {
            counter.addAndGet(bytes);
        }
    }

    /** Gives the resource back to CUDA; called once, by the first {@link #close}, with the device current. */
    protected abstract void release();

    /** True once {@link #close} has been called. */
    public final boolean isClosed() {
        return closed.get();
    }

    /** Throws {@code IllegalStateException("<what> is closed")} once this resource is closed. */
    protected final void checkOpen(String what) {
        if (closed.get()) {
            throw new IllegalStateException(what + " is closed");
        }
    }

    @Override
    public final synchronized void close() {
        if (!closed.compareAndSet(false, true) || device == null) {
            return;
        }
        device.makeCurrent();
        if (counter != null) {
            counter.addAndGet(-countedBytes);
        }
        release();
    }
}
