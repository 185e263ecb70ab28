package org.sparkccl.ipc.cuda;

import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A peer process's {@link ShareableDeviceMemory}, imported from the file descriptor it passed and
 * mapped here for this process's GPU. The import is a reference of this process's own: the memory
 * stays valid after the peer dies, until {@link #close()} (which is what gives it back to the GPU).
 * Counted: {@link #mappedBytes()} is what this process has imported and not released.
 */
public final class ImportedDeviceMemory implements AutoCloseable {
    private static final AtomicLong MAPPED = new AtomicLong();

    private final CudaDevice device;
    private final long handle;
    private final long address;
    private final long size;
    private final String where;
    private boolean closed;

    private ImportedDeviceMemory(CudaDevice device, long handle, long address, long size, String where) {
        this.device = device;
        this.handle = handle;
        this.address = address;
        this.size = size;
        this.where = where;
    }

    /**
     * Imports the allocation of {@code bytes} (its whole size, as the exporter reports it) behind
     * {@code descriptor} and maps it for kernels on {@code device}. The descriptor stays open: the
     * caller closes it (the mapping does not need it).
     */
    public static ImportedDeviceMemory open(CudaDevice device, int descriptor, long bytes, String where) {
        device.makeCurrent();
        long granularity = CudaVmm.granularity(device, where);
        if (bytes <= 0 || bytes % granularity != 0) {
            throw new IllegalArgumentException("an imported allocation of " + bytes + " bytes on " + where
                    + " is not a whole number of " + granularity + "-byte granules: the exporter sent a wrong size");
        }
        long handle = CudaVmm.importDescriptor(descriptor, where);
        try {
            long address = CudaVmm.map(handle, bytes, granularity, List.of(device), where);
            MAPPED.addAndGet(bytes);
            return new ImportedDeviceMemory(device, handle, address, bytes, where);
        } catch (RuntimeException e) {
            CudaVmm.release(handle);
            throw e;
        }
    }

    /** The mapping's base in this process. */
    public long address() {
        return address;
    }

    /** Bytes of peers' memory this process has imported and not released. */
    public static long mappedBytes() {
        return MAPPED.get();
    }

    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        device.makeCurrent();
        MAPPED.addAndGet(-size);
        CudaVmm.unmapAndRelease(address, size, handle, where);
    }
}
