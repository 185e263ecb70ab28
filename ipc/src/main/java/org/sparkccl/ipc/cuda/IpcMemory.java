package org.sparkccl.ipc.cuda;

import java.lang.reflect.Field;
import jcuda.driver.CUdeviceptr;
import jcuda.driver.CUipcMemHandle;
import jcuda.driver.CUipcMem_flags;
import jcuda.driver.JCudaDriver;

/**
 * CUDA IPC of device memory between processes. A handle names a whole allocation (its base), so a
 * region is exported as (handle of the base, offset); the opener maps the base and adds the offset.
 * A handle cannot be opened in the process that exported it: same-process peers use plain pointers.
 */
public final class IpcMemory extends NativeResource {
    public static final int HANDLE_BYTES = 64;
    private static final Field RESERVED;

    static {
        try {
            RESERVED = CUipcMemHandle.class.getDeclaredField("reserved");
            RESERVED.setAccessible(true);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError("JCuda's CUipcMemHandle has no 'reserved' field: " + e);
        }
    }

    private final long base;
    private final String where;

    private IpcMemory(CudaDevice device, long base, String where) {
        super(device);
        this.base = base;
        this.where = where;
    }

    /** The allocation that holds {@code address}: {base, size}. */
    public static long[] allocationRange(CudaDevice device, long address, String where) {
        device.makeCurrent();
        CUdeviceptr base = new CUdeviceptr();
        long[] size = new long[1];
        Cuda.check(JCudaDriver.cuMemGetAddressRange(base, size, Cuda.devicePointer(address)), "cuMemGetAddressRange", where);
        return new long[] {Cuda.address(base), size[0]};
    }

    /** The 64 opaque bytes of an IPC handle for the allocation whose base is {@code base}. */
    public static byte[] exportHandle(CudaDevice device, long base, String where) {
        device.makeCurrent();
        CUipcMemHandle h = new CUipcMemHandle();
        Cuda.check(JCudaDriver.cuIpcGetMemHandle(h, Cuda.devicePointer(base)), "cuIpcGetMemHandle", where);
        try {
            byte[] bytes = (byte[]) RESERVED.get(h);
            if (bytes == null || bytes.length != HANDLE_BYTES) {
                throw new IllegalStateException("unexpected CUipcMemHandle layout in this JCuda version");
            }
            return bytes.clone();
        } catch (IllegalAccessException e) {
            throw new IllegalStateException(e);
        }
    }

    /** Maps a peer process's allocation into {@code device}'s context, enabling peer access lazily. */
    public static IpcMemory open(CudaDevice device, byte[] handle, String where) {
        if (handle.length != HANDLE_BYTES) {
            throw new IllegalArgumentException("IPC handle of " + handle.length + " bytes, expected " + HANDLE_BYTES);
        }
        device.makeCurrent();
        CUipcMemHandle h = new CUipcMemHandle();
        try {
            RESERVED.set(h, handle.clone());
        } catch (IllegalAccessException e) {
            throw new IllegalStateException(e);
        }
        CUdeviceptr p = new CUdeviceptr();
        Cuda.check(JCudaDriver.cuIpcOpenMemHandle(p, h, CUipcMem_flags.CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
                "cuIpcOpenMemHandle", where);
        return new IpcMemory(device, Cuda.address(p), where);
    }

    /** The mapped base in this process. */
    public long base() {
        return base;
    }

    @Override
    protected void release() {
        Cuda.check(JCudaDriver.cuIpcCloseMemHandle(Cuda.devicePointer(base)), "cuIpcCloseMemHandle", where);
    }
}
