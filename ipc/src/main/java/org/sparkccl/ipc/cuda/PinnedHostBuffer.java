package org.sparkccl.ipc.cuda;

import java.util.concurrent.atomic.AtomicLong;
import jcuda.Pointer;
import jcuda.driver.CUdeviceptr;
import jcuda.driver.JCudaDriver;
import org.agrona.UnsafeApi;
import org.sparkccl.core.jdk.JdkAccess;

/**
 * Page-locked host memory from {@code cuMemHostAlloc(portable | devicemap)}: the host reads and
 * writes it at {@link #address()}, kernels at {@link #devicePointer()}. Zero-filled, counted like
 * {@link DeviceBuffer}.
 */
public final class PinnedHostBuffer extends NativeResource {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    private static final AtomicLong OUTSTANDING = new AtomicLong();

    private final Pointer pointer;
    private final long address;
    private final long devicePointer;
    private final long size;
    private final String where;

    private PinnedHostBuffer(CudaDevice device, Pointer pointer, long address, long devicePointer, long size,
                             String where) {
        super(device, OUTSTANDING, size);
        this.pointer = pointer;
        this.address = address;
        this.devicePointer = devicePointer;
        this.size = size;
        this.where = where;
    }

    public static PinnedHostBuffer allocate(CudaDevice device, long bytes, String owner) {
        if (bytes <= 0) {
            throw new IllegalArgumentException("pinned allocation of " + bytes + " bytes");
        }
        String where = device.where() + (owner.isEmpty() ? "" : ", " + owner);
        device.makeCurrent();
        Pointer p = new Pointer();
        Cuda.check(JCudaDriver.cuMemHostAlloc(p, bytes,
                JCudaDriver.CU_MEMHOSTALLOC_PORTABLE | JCudaDriver.CU_MEMHOSTALLOC_DEVICEMAP),
                "cuMemHostAlloc(" + bytes + " bytes)", where);
        long host = Cuda.address(p);
        CUdeviceptr d = new CUdeviceptr();
        int rc = JCudaDriver.cuMemHostGetDevicePointer(d, p, 0);
        if (rc != 0) {
            JCudaDriver.cuMemFreeHost(p);
            Cuda.check(rc, "cuMemHostGetDevicePointer", where);
        }
        UnsafeApi.setMemory(host, bytes, (byte) 0);
        return new PinnedHostBuffer(device, p, host, Cuda.address(d), bytes, where);
    }

    /** Host address. */
    public long address() {
        return address;
    }

    /** The address kernels on this buffer's device use. */
    public long devicePointer() {
        return devicePointer;
    }

    public long size() {
        return size;
    }

    public static long outstandingBytes() {
        return OUTSTANDING.get();
    }

    @Override
    protected void release() {
        Cuda.check(JCudaDriver.cuMemFreeHost(pointer), "cuMemFreeHost(" + size + " bytes)", where);
    }
}
