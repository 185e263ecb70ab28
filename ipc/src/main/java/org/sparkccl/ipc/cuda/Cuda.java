package org.sparkccl.ipc.cuda;

import jcuda.Pointer;
import jcuda.driver.CUdeviceptr;
import jcuda.driver.CUresult;
import jcuda.driver.JCudaDriver;

/** Checks on CUDA results, and conversions between raw addresses and JCuda pointers. */
public final class Cuda {
    private Cuda() {
    }

    /** Throws a {@link CudaException} naming {@code call} and {@code where} unless {@code result} is success. */
    public static void check(int result, String call, String where) {
        if (result != CUresult.CUDA_SUCCESS) {
            throw new CudaException(call, result, where);
        }
    }

    /** E.g. {@code CUDA_ERROR_OUT_OF_MEMORY}. */
    public static String errorName(int result) {
        try {
            String[] name = new String[1];
            if (JCudaDriver.cuGetErrorName(result, name) == CUresult.CUDA_SUCCESS && name[0] != null) {
                return name[0];
            }
        } catch (Throwable e) {
            // The native library is not there: fall back to JCuda's own table.
        }
        return CUresult.stringFor(result);
    }

    /** A JCuda device pointer for a raw device address. */
    public static CUdeviceptr devicePointer(long address) {
        return new CUdeviceptr().withByteOffset(address);
    }

    /** A JCuda host pointer for a raw host address (accepted by copies, not by registration). */
    public static Pointer hostPointer(long address) {
        return new Pointer().withByteOffset(address);
    }

    /**
     * A JCuda pointer to {@code size} bytes of host memory at {@code address} that every call
     * accepts: JCuda refuses a bare address in {@code cuMemHostRegister} and friends ("Pointer must
     * point to a direct buffer or native memory"), so the memory is wrapped in a direct buffer
     * (the constructor JNI's NewDirectByteBuffer uses; needs --add-opens java.base/java.nio).
     */
    public static Pointer hostMemory(long address, long size) {
        if (size > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("host range of " + size + " bytes is larger than 2 GiB");
        }
        try {
            return Pointer.to((java.nio.ByteBuffer) DirectBuffers.CONSTRUCTOR.newInstance(address, (int) size));
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("cannot wrap host memory for JCuda: " + e
                    + "; run with --add-opens=java.base/java.nio=ALL-UNNAMED", e);
        }
    }

    private static final class DirectBuffers {
        static final java.lang.reflect.Constructor<?> CONSTRUCTOR;

        static {
            try {
                CONSTRUCTOR = Class.forName("java.nio.DirectByteBuffer").getDeclaredConstructor(long.class, int.class);
                CONSTRUCTOR.setAccessible(true);
            } catch (ReflectiveOperationException | RuntimeException e) {
                throw new IllegalStateException("java.nio.DirectByteBuffer(long, int) is not accessible (" + e
                        + "); run with --add-opens=java.base/java.nio=ALL-UNNAMED", e);
            }
        }
    }

    /** The raw address a JCuda pointer holds (native pointer plus byte offset). */
    public static long address(Pointer pointer) {
        return RawPointer.addressOf(pointer);
    }

    /** The raw handle a JCuda driver object holds (a CUstream's, say), for calls bound outside JCuda. */
    public static long handleAddress(jcuda.NativePointerObject handle) {
        return RawHandle.addressOf(handle);
    }

    /** Reads JCuda's protected handle field, which is all a subclass may do. */
    private static final class RawHandle extends jcuda.NativePointerObject {
        static long addressOf(jcuda.NativePointerObject o) {
            return new RawHandle(o).getNativePointer();
        }

        private RawHandle(jcuda.NativePointerObject o) {
            super(o);
        }
    }

    /** Reads JCuda's protected pointer fields, which is all a subclass may do. */
    private static final class RawPointer extends Pointer {
        static long addressOf(Pointer p) {
            return new RawPointer(p).raw();
        }

        private RawPointer(Pointer p) {
            super(p);
        }

        private long raw() {
            return getNativePointer() + getByteOffset();
        }
    }
}
