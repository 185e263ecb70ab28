package org.sparkccl.ipc.cuda;

import java.nio.ByteBuffer;
import java.util.concurrent.atomic.AtomicLong;
import jcuda.Pointer;
import jcuda.driver.CUdeviceptr;
import jcuda.driver.JCudaDriver;
import org.agrona.BufferUtil;
import org.agrona.UnsafeApi;
import org.sparkccl.core.jdk.JdkAccess;

/**
 * Device memory from {@code cuMemAlloc}, freed on close, and counted: {@link #outstandingBytes()}
 * is what this process has allocated and not freed (tests assert it returns to 0).
 *
 * <p>{@code cuMemFree} may wait for the whole device: never close one while a rank of this process
 * on the same GPU runs a collective that waits for this thread.
 */
public final class DeviceBuffer extends NativeResource {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    private static final AtomicLong OUTSTANDING = new AtomicLong();

    private final CudaDevice device;
    private final long address;
    private final long size;
    private final String where;

    private DeviceBuffer(CudaDevice device, long address, long size, String where) {
        super(device, OUTSTANDING, size);
        this.device = device;
        this.address = address;
        this.size = size;
        this.where = where;
    }

    /** {@code bytes} of device memory on {@code device}; {@code owner} (e.g. {@code rank 3}) goes into errors. */
    public static DeviceBuffer allocate(CudaDevice device, long bytes, String owner) {
        if (bytes <= 0) {
            throw new IllegalArgumentException("device allocation of " + bytes + " bytes");
        }
        String where = device.where() + (owner.isEmpty() ? "" : ", " + owner);
        device.makeCurrent();
        CUdeviceptr p = new CUdeviceptr();
        Cuda.check(JCudaDriver.cuMemAlloc(p, bytes), "cuMemAlloc(" + bytes + " bytes)", where);
        return new DeviceBuffer(device, Cuda.address(p), bytes, where);
    }

    public long address() {
        return address;
    }

    public long size() {
        return size;
    }

    public CudaDevice device() {
        return device;
    }

    public CUdeviceptr pointer() {
        return Cuda.devicePointer(address);
    }

    /** Fills with {@code value} bytes through {@code stream}, and waits. */
    public void fill(byte value, CudaStream stream) {
        fill(address, size, value, stream, where);
    }

    /** Fills {@code bytes} of device memory at {@code deviceAddress} with {@code value} through {@code stream}, and waits. */
    public static void fill(long deviceAddress, long bytes, byte value, CudaStream stream, String where) {
        stream.device().makeCurrent();
        Cuda.check(JCudaDriver.cuMemsetD8Async(Cuda.devicePointer(deviceAddress), value, bytes, stream.handle()),
                "cuMemsetD8Async(" + bytes + " bytes)", where);
        stream.synchronize();
    }

    /** Copies {@code bytes} from host memory at {@code hostAddress} to offset {@code offset}, through {@code stream}. */
    public void copyFromHost(long offset, long hostAddress, long bytes, CudaStream stream) {
        check(offset, bytes);
        device.makeCurrent();
        Cuda.check(JCudaDriver.cuMemcpyHtoDAsync(Cuda.devicePointer(address + offset), Cuda.hostMemory(hostAddress, bytes),
                bytes, stream.handle()), "cuMemcpyHtoDAsync(" + bytes + " bytes)", where);
        stream.synchronize();
    }

    public void copyToHost(long offset, long hostAddress, long bytes, CudaStream stream) {
        check(offset, bytes);
        device.makeCurrent();
        Cuda.check(JCudaDriver.cuMemcpyDtoHAsync(Cuda.hostMemory(hostAddress, bytes), Cuda.devicePointer(address + offset),
                bytes, stream.handle()), "cuMemcpyDtoHAsync(" + bytes + " bytes)", where);
        stream.synchronize();
    }

    /** Java array (primitive) to device, synchronously through {@code stream}. */
    public void copyFromArray(Object array, long bytes, CudaStream stream) {
        check(0, bytes);
        copyArrayToDevice(address, array, bytes, stream, where);
    }

    public void copyToArray(Object array, long bytes, CudaStream stream) {
        check(0, bytes);
        copyDeviceToArray(array, address, bytes, stream, where);
    }

    /**
     * {@code bytes} of a primitive array to {@code deviceAddress}, through {@code stream}, then waits.
     * JCuda refuses Java arrays in asynchronous copies (and the synchronous ones run on the legacy
     * stream), so the bytes go through a direct buffer.
     */
    public static void copyArrayToDevice(long deviceAddress, Object array, long bytes, CudaStream stream, String where) {
        if (bytes == 0) {
            return;
        }
        ByteBuffer staging = ByteBuffer.allocateDirect((int) bytes);
        UnsafeApi.copyMemory(array, UnsafeApi.arrayBaseOffset(array.getClass()), null, BufferUtil.address(staging), bytes);
        stream.device().makeCurrent();
        Cuda.check(JCudaDriver.cuMemcpyHtoDAsync(Cuda.devicePointer(deviceAddress), Pointer.to(staging), bytes,
                stream.handle()), "cuMemcpyHtoDAsync(" + bytes + " bytes)", where);
        stream.synchronize();
        java.lang.ref.Reference.reachabilityFence(staging);
    }

    /** {@code bytes} from {@code deviceAddress} into a primitive array, through {@code stream}. */
    public static void copyDeviceToArray(Object array, long deviceAddress, long bytes, CudaStream stream, String where) {
        if (bytes == 0) {
            return;
        }
        ByteBuffer staging = ByteBuffer.allocateDirect((int) bytes);
        stream.device().makeCurrent();
        Cuda.check(JCudaDriver.cuMemcpyDtoHAsync(Pointer.to(staging), Cuda.devicePointer(deviceAddress), bytes,
                stream.handle()), "cuMemcpyDtoHAsync(" + bytes + " bytes)", where);
        stream.synchronize();
        UnsafeApi.copyMemory(null, BufferUtil.address(staging), array, UnsafeApi.arrayBaseOffset(array.getClass()), bytes);
        java.lang.ref.Reference.reachabilityFence(staging);
    }

    private void check(long offset, long bytes) {
        if (offset < 0 || bytes < 0 || offset + bytes > size) {
            throw new IndexOutOfBoundsException(bytes + " bytes at " + offset + " outside a device buffer of " + size);
        }
    }

    /** Bytes of device memory this process allocated through this class and has not freed. */
    public static long outstandingBytes() {
        return OUTSTANDING.get();
    }

    @Override
    protected void release() {
        Cuda.check(JCudaDriver.cuMemFree(pointer()), "cuMemFree(" + size + " bytes)", where);
    }
}
