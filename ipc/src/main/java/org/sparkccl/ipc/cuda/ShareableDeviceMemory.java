package org.sparkccl.ipc.cuda;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Device memory that processes of this host map for themselves, as NCCL allocates with
 * NCCL_CUMEM_ENABLE: {@code cuMemCreate} (POSIX fd handles requested), mapped at an address range of
 * this process ({@link #allocate}), shared as a file descriptor ({@link #exportDescriptor}) that a peer
 * process imports and maps at a range of its own ({@link #importDescriptor}). Each side's handle and
 * mapping is a reference of its own: CUDA frees the memory only once every handle, descriptor and
 * mapping of it is gone, so when the allocating process dies what a peer imported stays valid, holding
 * that process's last bytes, until the peer closes it (GpuWindowOwnerDiesTest).
 *
 * <p>Sizes are rounded up to CUDA's granularity (2 MiB on recent GPUs). Counted:
 * {@link #outstandingBytes()} is what this process allocated and has not released,
 * {@link #importedBytes()} what it imported from peers and has not released.
 */
public final class ShareableDeviceMemory extends NativeResource {
    private static final AtomicLong OUTSTANDING = new AtomicLong();
    private static final AtomicLong IMPORTED = new AtomicLong();

    private final CudaDevice device;
    private final long handle;
    private final long address;
    private final long size;
    private final String where;

    private ShareableDeviceMemory(CudaDevice device, long handle, long address, long size, String where,
                                  AtomicLong counter) {
        super(device, counter, size); // counter: OUTSTANDING or IMPORTED
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
        List<CudaDevice> accessors = new ArrayList<>(List.of(device));
        for (CudaDevice d : alsoAccessedBy) {
            if (!accessors.contains(d)) {
                accessors.add(d);
            }
        }
        long handle = CudaVmm.create(device, size, where);
        return mapped(device, handle, size, granularity, accessors, where, OUTSTANDING);
    }

    /**
     * A peer process's allocation of {@code bytes} (its whole size, as the peer reports it), imported from
     * {@code descriptor} and mapped for kernels on {@code device}. The descriptor stays open: the caller
     * closes it (the mapping does not need it).
     */
    public static ShareableDeviceMemory importDescriptor(CudaDevice device, int descriptor, long bytes, String where) {
        device.makeCurrent();
        long granularity = CudaVmm.granularity(device, where);
        if (bytes <= 0 || bytes % granularity != 0) {
            throw new IllegalArgumentException("an imported allocation of " + bytes + " bytes on " + where
                    + " is not a whole number of " + granularity + "-byte granules: the exporter sent a wrong size");
        }
        long handle = CudaVmm.importDescriptor(descriptor, where);
        return mapped(device, handle, bytes, granularity, List.of(device), where, IMPORTED);
    }

    /** Maps {@code handle} for {@code accessors}; the handle is released if that fails. */
    private static ShareableDeviceMemory mapped(CudaDevice device, long handle, long size, long granularity,
                                                List<CudaDevice> accessors, String where, AtomicLong counter) {
        try {
            long address = CudaVmm.map(handle, size, granularity, accessors, where);
            return new ShareableDeviceMemory(device, handle, address, size, where, counter);
        } catch (RuntimeException e) {
            CudaVmm.release(handle);
            throw e;
        }
    }

    /** The mapping's base in this process. */
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
        checkOpen("shareable device memory on " + where);
        device.makeCurrent();
        return CudaVmm.exportDescriptor(handle, where);
    }

    /** Bytes this process allocated through this class and has not released. */
    public static long outstandingBytes() {
        return OUTSTANDING.get();
    }

    /** Bytes of peers' memory this process imported through this class and has not released. */
    public static long importedBytes() {
        return IMPORTED.get();
    }

    /** Unmaps and drops this process's reference; the memory goes once no process holds one. */
    @Override
    protected void release() {
        CudaVmm.unmapAndRelease(address, size, handle, where);
    }
}
