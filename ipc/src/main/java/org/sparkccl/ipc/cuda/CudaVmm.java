package org.sparkccl.ipc.cuda;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.List;
import jcuda.driver.CUdevice_attribute;

/**
 * CUDA's virtual memory calls (cuMemCreate, cuMemMap, cuMemExportToShareableHandle, ...), bound
 * straight to the driver (libcuda.so.1) through JNA's direct mapping. JCuda 12.0.0 has them, but its
 * native side passes NULL as cuMemExportToShareableHandle's output (the descriptor never comes back)
 * and fills CUmemAllocationProp's allocFlags from the wrong Java object (compression and usage bits
 * read from unrelated fields); so the structs are laid out here, as cuda.h declares them on 64-bit
 * Linux, and every call goes to the driver directly. Handles and addresses are plain longs.
 *
 * <pre>
 * CUmemAllocationProp (32 bytes): int type, int requestedHandleTypes, {int type, int id} location,
 *                                 void* win32HandleMetaData, {u8 compressionType, u8 gpuDirectRDMACapable,
 *                                 u16 usage, u8 reserved[4]} allocFlags
 * CUmemAccessDesc     (12 bytes): {int type, int id} location, int flags
 * </pre>
 */
final class CudaVmm {
    static final int HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1;
    private static final int ALLOCATION_TYPE_PINNED = 1;
    private static final int LOCATION_TYPE_DEVICE = 1;
    private static final int ACCESS_READWRITE = 3;
    private static final int GRANULARITY_RECOMMENDED = 1;
    private static final int PROP_BYTES = 32;
    private static final int ACCESS_DESC_BYTES = 12;

    private CudaVmm() {
    }

    /**
     * Null when {@code device} can share memory with other processes as POSIX file descriptors (the
     * virtual memory API, those handles, and the driver bound through JNA), else why not.
     */
    static String unavailableReason(CudaDevice device) {
        if (DriverDirect.UNAVAILABLE != null) {
            return DriverDirect.UNAVAILABLE;
        }
        if (device.attribute(CUdevice_attribute.CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED) == 0) {
            return device.where() + " does not support CUDA's virtual memory management";
        }
        if (device.attribute(CUdevice_attribute.CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED) == 0) {
            return device.where() + " does not support POSIX file descriptor handles";
        }
        return null;
    }

    /** The allocation properties of device memory on {@code device} that may be exported as a POSIX fd. */
    private static byte[] allocationProp(CudaDevice device) {
        ByteBuffer b = ByteBuffer.allocate(PROP_BYTES).order(ByteOrder.nativeOrder());
        b.putInt(0, ALLOCATION_TYPE_PINNED);
        b.putInt(4, HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        b.putInt(8, LOCATION_TYPE_DEVICE);
        b.putInt(12, device.ordinal());
        return b.array(); // no Windows metadata, no compression, no RDMA, no usage flags
    }

    /** Sizes and alignments of mappings on {@code device} are multiples of this (CUDA's recommendation). */
    static long granularity(CudaDevice device, String where) {
        long[] granularity = new long[1];
        Cuda.check(DriverDirect.cuMemGetAllocationGranularity(granularity, allocationProp(device), GRANULARITY_RECOMMENDED),
                "cuMemGetAllocationGranularity", where);
        return granularity[0];
    }

    static long roundUp(long bytes, long granularity) {
        return (bytes + granularity - 1) / granularity * granularity;
    }

    /** A new allocation of {@code bytes} (a multiple of the granularity) on {@code device}: its handle. */
    static long create(CudaDevice device, long bytes, String where) {
        long[] handle = new long[1];
        Cuda.check(DriverDirect.cuMemCreate(handle, bytes, allocationProp(device), 0),
                "cuMemCreate(" + bytes + " bytes, POSIX fd handle)", where);
        return handle[0];
    }

    /**
     * Maps all {@code bytes} of allocation {@code handle} at a fresh address range of this process and
     * lets kernels on {@code accessors} read and write it; returns the address. Undoes what it did when
     * a step fails (the handle stays the caller's).
     */
    static long map(long handle, long bytes, long granularity, List<CudaDevice> accessors, String where) {
        long[] address = new long[1];
        Cuda.check(DriverDirect.cuMemAddressReserve(address, bytes, granularity, 0, 0), "cuMemAddressReserve(" + bytes
                + " bytes)", where);
        boolean mapped = false;
        try {
            Cuda.check(DriverDirect.cuMemMap(address[0], bytes, 0, handle, 0), "cuMemMap(" + bytes + " bytes)", where);
            mapped = true;
            ByteBuffer desc = ByteBuffer.allocate(ACCESS_DESC_BYTES * accessors.size()).order(ByteOrder.nativeOrder());
            for (CudaDevice d : accessors) {
                desc.putInt(LOCATION_TYPE_DEVICE).putInt(d.ordinal()).putInt(ACCESS_READWRITE);
            }
            Cuda.check(DriverDirect.cuMemSetAccess(address[0], bytes, desc.array(), accessors.size()),
                    "cuMemSetAccess(" + accessors.size() + " GPU(s))", where);
            return address[0];
        } catch (RuntimeException e) {
            if (mapped) {
                DriverDirect.cuMemUnmap(address[0], bytes);
            }
            DriverDirect.cuMemAddressFree(address[0], bytes);
            throw e;
        }
    }

    /**
     * Unmaps {@code bytes} at {@code address}, frees the range and drops this process's reference to
     * the allocation; each step is tried even when one before failed, and the first failure is thrown.
     * The memory itself goes once no process maps it or holds a handle or descriptor of it.
     */
    static void unmapAndRelease(long address, long bytes, long handle, String where) {
        int unmap = DriverDirect.cuMemUnmap(address, bytes);
        int free = DriverDirect.cuMemAddressFree(address, bytes);
        int release = DriverDirect.cuMemRelease(handle);
        Cuda.check(unmap, "cuMemUnmap(" + bytes + " bytes)", where);
        Cuda.check(free, "cuMemAddressFree(" + bytes + " bytes)", where);
        Cuda.check(release, "cuMemRelease", where);
    }

    /** Drops a handle that was never mapped (allocation or import failed half-way). */
    static void release(long handle) {
        DriverDirect.cuMemRelease(handle);
    }

    /** A new POSIX file descriptor for allocation {@code handle}; the caller closes it. */
    static int exportDescriptor(long handle, String where) {
        int[] fd = {-1};
        Cuda.check(DriverDirect.cuMemExportToShareableHandle(fd, handle, HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                "cuMemExportToShareableHandle(POSIX fd)", where);
        return fd[0];
    }

    /** This process's handle of the allocation behind {@code descriptor} (which stays open: close it after). */
    static long importDescriptor(int descriptor, String where) {
        long[] handle = new long[1];
        Cuda.check(DriverDirect.cuMemImportFromShareableHandle(handle, descriptor, HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                "cuMemImportFromShareableHandle(fd " + descriptor + ")", where);
        return handle[0];
    }
}
