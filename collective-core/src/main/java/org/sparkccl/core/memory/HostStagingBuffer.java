package org.sparkccl.core.memory;

import org.sparkccl.core.StagingBuffer;
import org.sparkccl.core.jdk.JdkAccess;
import java.util.concurrent.atomic.AtomicLong;
import org.agrona.UnsafeApi;

/** Off-heap scratch for running host collectives on Java arrays; counted in {@link #outstandingBytes()}. */
public final class HostStagingBuffer implements StagingBuffer {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    private static final AtomicLong OUTSTANDING = new AtomicLong();

    private final long address;
    private final long size;
    private boolean closed;

    public HostStagingBuffer(long size) {
        if (size <= 0) {
            throw new IllegalArgumentException("staging size must be positive, was " + size);
        }
        this.address = UnsafeApi.allocateMemory(size);
        this.size = size;
        OUTSTANDING.addAndGet(size);
    }

    /** Bytes of staging memory allocated in this JVM and not yet closed. */
    public static long outstandingBytes() {
        return OUTSTANDING.get();
    }

    @Override
    public long address() {
        return address;
    }

    @Override
    public long size() {
        return size;
    }

    @Override
    public void copyIn(Object javaArray, long bytes) {
        check(javaArray, bytes);
        UnsafeApi.copyMemory(javaArray, UnsafeApi.arrayBaseOffset(javaArray.getClass()), null, address, bytes);
    }

    @Override
    public void copyOut(Object javaArray, long bytes) {
        check(javaArray, bytes);
        UnsafeApi.copyMemory(null, address, javaArray, UnsafeApi.arrayBaseOffset(javaArray.getClass()), bytes);
    }

    private void check(Object array, long bytes) {
        Class<?> c = array.getClass();
        if (!c.isArray() || !c.getComponentType().isPrimitive()) {
            throw new IllegalArgumentException("need a primitive array, got " + c.getName());
        }
        long arrayBytes = (long) java.lang.reflect.Array.getLength(array) * UnsafeApi.arrayIndexScale(c);
        if (bytes > arrayBytes || bytes > size) {
            throw new IllegalArgumentException("copy of " + bytes + " bytes exceeds the array (" + arrayBytes
                    + ") or the staging buffer (" + size + ")");
        }
    }

    @Override
    public synchronized void close() {
        if (!closed) {
            closed = true;
            UnsafeApi.freeMemory(address);
            OUTSTANDING.addAndGet(-size);
        }
    }
}
