package org.sparkccl.core.memory;

import java.util.concurrent.atomic.AtomicLong;

/**
 * A {@link HostMemoryBlock} at an aligned address inside memory that {@code release} frees, counted
 * in its source's outstanding bytes until the first {@link #close()} (later ones do nothing).
 */
final class AccountedBlock implements HostMemoryBlock {
    private final long address;
    private final long size;
    private final AtomicLong outstanding;
    private final Runnable release;
    private boolean freed;

    /** Adds {@code size} to {@code outstanding} now; closing frees with {@code release} and takes it back. */
    AccountedBlock(long address, long size, AtomicLong outstanding, Runnable release) {
        this.address = address;
        this.size = size;
        this.outstanding = outstanding;
        this.release = release;
        outstanding.addAndGet(size);
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
    public synchronized void close() {
        if (!freed) {
            freed = true;
            release.run();
            outstanding.addAndGet(-size);
        }
    }
}
