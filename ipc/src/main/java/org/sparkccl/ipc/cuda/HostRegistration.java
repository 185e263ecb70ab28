package org.sparkccl.ipc.cuda;

import java.util.concurrent.atomic.AtomicLong;
import jcuda.driver.CUdeviceptr;
import jcuda.driver.CUresult;
import jcuda.driver.JCudaDriver;

/**
 * Host memory that someone else allocated (a mapped /dev/shm segment) made visible to kernels with
 * {@code cuMemHostRegister(portable | devicemap)}, as NCCL's SHM transport does. A range this
 * process already registered (a same-process peer mapped the same segment) is used as it is and
 * left registered on close; its owner unregisters it.
 */
public final class HostRegistration extends NativeResource {
    private static final AtomicLong OUTSTANDING = new AtomicLong();

    private final long address;
    private final long size;
    private final long devicePointer;
    private final String where;

    /** Only an owned registration is counted and unregistered on close: a borrowed one has nothing to release. */
    private HostRegistration(CudaDevice device, long address, long size, long devicePointer, boolean owned, String where) {
        super(owned ? device : null, owned ? OUTSTANDING : null, size);
        this.address = address;
        this.size = size;
        this.devicePointer = devicePointer;
        this.where = where;
    }

    public static HostRegistration register(CudaDevice device, long address, long bytes, String owner) {
        String where = device.where() + (owner.isEmpty() ? "" : ", " + owner);
        device.makeCurrent();
        int rc = JCudaDriver.cuMemHostRegister(Cuda.hostMemory(address, bytes), bytes,
                JCudaDriver.CU_MEMHOSTREGISTER_PORTABLE | JCudaDriver.CU_MEMHOSTREGISTER_DEVICEMAP);
        boolean owned = rc == CUresult.CUDA_SUCCESS;
        if (!owned && rc != CUresult.CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED) {
            Cuda.check(rc, "cuMemHostRegister(" + bytes + " bytes at 0x" + Long.toHexString(address) + ")", where);
        }
        CUdeviceptr d = new CUdeviceptr();
        rc = JCudaDriver.cuMemHostGetDevicePointer(d, Cuda.hostMemory(address, bytes), 0);
        if (rc != CUresult.CUDA_SUCCESS) {
            if (owned) {
                JCudaDriver.cuMemHostUnregister(Cuda.hostMemory(address, bytes));
            }
            Cuda.check(rc, "cuMemHostGetDevicePointer", where);
        }
        return new HostRegistration(device, address, bytes, Cuda.address(d), owned, where);
    }

    /** The address kernels use for the host range. */
    public long devicePointer() {
        return devicePointer;
    }

    public long hostAddress() {
        return address;
    }

    public long size() {
        return size;
    }

    /** Bytes registered by this process and not yet unregistered. */
    public static long outstandingBytes() {
        return OUTSTANDING.get();
    }

    @Override
    protected void release() {
        Cuda.check(JCudaDriver.cuMemHostUnregister(Cuda.hostMemory(address, size)), "cuMemHostUnregister", where);
    }
}
