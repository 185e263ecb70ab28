package org.sparkccl.ipc.cuda;

import com.sun.jna.Native;
import java.lang.reflect.Field;
import jcuda.NativePointerObject;

/**
 * The driver calls on a small collective's critical path ({@code cuLaunchKernel}, {@code cuGraphLaunch},
 * {@code cuCtxSetCurrent})
 * bound straight to libcuda.so.1 through JNA's direct mapping, with handles and parameter arrays as raw
 * addresses prepared once. JCuda's {@code cuLaunchKernel} took 4.3-9 us per call from Java on the H200
 * (its JNI side walks the Pointer-to-Pointer parameter objects and pins each on every call); the driver's
 * own call takes about 2 us (GpuFloorsBench measures both in the same run). Where JNA cannot bind the
 * driver, {@link #AVAILABLE} is false and callers use JCuda.
 */
public final class DirectLaunch {
    /** True when the driver's entry points below are bound. */
    public static final boolean AVAILABLE;
    private static final String UNAVAILABLE;
    private static final Field NATIVE_POINTER;

    static {
        String reason = null;
        Field field = null;
        try {
            field = NativePointerObject.class.getDeclaredField("nativePointer");
            field.setAccessible(true);
            Native.register(DirectLaunch.class, "libcuda.so.1");
        } catch (LinkageError | ReflectiveOperationException | RuntimeException e) {
            reason = "cuLaunchKernel could not be bound through JNA: " + e;
        }
        NATIVE_POINTER = field;
        UNAVAILABLE = reason;
        AVAILABLE = reason == null;
    }

    private DirectLaunch() {
    }

    /** Null when {@link #AVAILABLE}, else why not. */
    public static String unavailableReason() {
        return UNAVAILABLE;
    }

    /** The driver handle a JCuda object ({@code CUfunction}, {@code CUstream}, {@code CUgraphExec}) wraps. */
    public static long handle(NativePointerObject o) {
        try {
            return NATIVE_POINTER.getLong(o);
        } catch (IllegalAccessException | RuntimeException e) {
            throw new IllegalStateException("the driver handle of " + o + " is not readable: " + e, e);
        }
    }

    /** Queues one replay of the instantiated graph {@code exec} on {@code stream} (raw handles). */
    public static void graphLaunch(long exec, long stream, String where) {
        int rc = cuGraphLaunch(exec, stream);
        if (rc != 0) {
            Cuda.check(rc, "cuGraphLaunch", where);
        }
    }

    /** The driver's cuLaunchKernel: handles, and {@code params} the address of a {@code void*[]} of argument addresses. */
    public static native int cuLaunchKernel(long f, int gx, int gy, int gz, int bx, int by, int bz, int sharedBytes,
                                            long stream, long params, long extra);

    public static native int cuGraphLaunch(long exec, long stream);

    public static native int cuCtxSetCurrent(long context);
}
