package org.sparkccl.ipc.cuda;

import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Device memory that processes of this host can map for themselves, as NCCL allocates with
 * NCCL_CUMEM_ENABLE: {@code cuMemCreate} (POSIX fd handles requested), mapped at an address range of
 * this process, shared as a file descriptor ({@link #exportDescriptor}) that a peer imports
 * ({@link ImportedDeviceMemory}). Unlike memory shared through CUDA IPC, a peer's import holds the
 * memory itself: when this process dies, what the peer maps stays valid until the peer lets go, so a
 * kernel of the peer that still reads it finds stale data instead of an illegal address (which
 * would end the peer's whole CUDA context).
 *
 * <p>Sizes are rounded up to CUDA's granularity (2 MiB on recent GPUs). Counted:
 * {@link #outstandingBytes()} is what this process allocated this way and has not released.
 */
public final class ShareableDeviceMemory implements AutoCloseable {
    private static final AtomicLong OUTSTANDING = new AtomicLong();

    private final CudaDevice device;
    private final long handle;
    private final long address;
    private final long size;
    private final String where;
    private boolean closed;

    private ShareableDeviceMemory(CudaDevice device, long handle, long address, long size, String where) {
        this.device = device;
        this.handle = handle;
        this.address = address;
        this.size = size;
        this.where = where;
    }

    /** Null when {@code device} can allocate such memory, else why not (for the log, and to fall back to IPC). */
    public static String unavailableReason(CudaDevice device) {
        return CudaVmm.unavailableReason(device);
    }

    /**
     * At least {@code bytes} of memory on {@code device} that kernels on {@code device} and on each of
     * {@code alsoAccessedBy} (GPUs of this process that reach it peer-to-peer) may read and write.
     */
    public static ShareableDeviceMemory allocate(CudaDevice device, long bytes, List<CudaDevice> alsoAccessedBy,
                                                 String owner) {
        if (bytes <= 0) {
            throw new IllegalArgumentException("shareable device allocation of " + bytes + " bytes");
        }
        String where = device.where() + (owner.isEmpty() ? "" : ", " + owner);
        device.makeCurrent();
        long granularity = CudaVmm.granularity(device, where);
        long size = CudaVmm.roundUp(bytes, granularity);
        long handle = CudaVmm.create(device, size, where);
        try {
            List<CudaDevice> accessors = new java.util.ArrayList<>(List.of(device));
            for (CudaDevice d : alsoAccessedBy) {
                if (!accessors.contains(d)) {
                    accessors.add(d);
                }
            }
            long address = CudaVmm.map(handle, size, granularity, accessors, where);
            OUTSTANDING.addAndGet(size);
            return new ShareableDeviceMemory(device, handle, address, size, where);
        } catch (RuntimeException e) {
            CudaVmm.release(handle);
            throw e;
        }
    }

    public long address() {
        return address;
    }

    /** The allocation's size: what was asked for, rounded up to the granularity. */
    public long size() {
        return size;
    }

    /**
     * A new POSIX file descriptor of this memory, for a peer process (pass it with SCM_RIGHTS). The
     * caller closes it; while it is open it holds the memory, as a mapping does.
     */
    public synchronized int exportDescriptor() {
        if (closed) {
            throw new IllegalStateException("shareable device memory on " + where + " is closed");
        }
        device.makeCurrent();
        return CudaVmm.exportDescriptor(handle, where);
    }

    /** Bytes this process allocated through this class and has not released. */
    public static long outstandingBytes() {
        return OUTSTANDING.get();
    }

    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        device.makeCurrent();
        OUTSTANDING.addAndGet(-size);
        CudaVmm.unmapAndRelease(address, size, handle, where);
    }
}
