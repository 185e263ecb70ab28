package org.sparkccl.core.memory;

import java.util.concurrent.atomic.AtomicLong;
import org.agrona.UnsafeApi;
import org.sparkccl.core.jdk.JdkAccess;

/**
 * Plain off-heap host memory (malloc through Agrona's {@code UnsafeApi}), aligned to 64 bytes. Available
 * everywhere; the fallback of {@link HostMemorySources#preferred()}.
 */
public final class OffHeapMemorySource implements HostMemorySource {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    public static final String NAME = "offheap";
    static final int ALIGNMENT = 64;

    private final AtomicLong outstanding = new AtomicLong();

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public String unavailableReason() {
        return null;
    }

    @Override
    public HostMemoryBlock allocate(long bytes) {
        if (bytes <= 0) {
            throw new IllegalArgumentException("host memory block size must be positive, got " + bytes);
        }
        long raw;
        try {
            raw = UnsafeApi.allocateMemory(bytes + ALIGNMENT - 1);
        } catch (OutOfMemoryError e) {
            throw new OutOfMemoryError("could not allocate " + bytes + " bytes of off-heap memory for a gradient "
                    + "buffer: " + e.getMessage() + "; free some memory or give the process more");
        }
        long aligned = (raw + ALIGNMENT - 1) & -ALIGNMENT;
        return new AccountedBlock(aligned, bytes, outstanding, () -> UnsafeApi.freeMemory(raw));
    }

    @Override
    public long outstandingBytes() {
        return outstanding.get();
    }

    @Override
    public String toString() {
        return NAME;
    }
}
