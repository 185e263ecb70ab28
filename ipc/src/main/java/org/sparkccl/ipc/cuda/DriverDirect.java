package org.sparkccl.ipc.cuda;

import com.sun.jna.Native;

/**
 * The CUDA driver's entry points that JCuda 12.0.0 does not bind, bound here, in one place, through JNA's
 * direct mapping: the virtual memory calls ({@link CudaVmm}), the batch of stream memory operations
 * ({@link StreamMemOps}: JCuda's {@code CUstreamBatchMemOpParams} has no fields), the extensible
 * launch ({@link ProgrammaticLaunch}) and a graph's kernel node rewritten then launched ({@link GraphLaunch}:
 * JCuda's calls would marshal a Java object of parameters on every launch). Handles, pointers and structs go as addresses ({@code long}).
 * Bound on first use, and only where JCuda already found a driver.
 */
final class DriverDirect {
    /** Null where every call below could be bound, else why not (no driver library, or a symbol missing). */
    static final String UNAVAILABLE;

    static {
        UNAVAILABLE = bind(DriverDirect.class, "the CUDA driver's calls that JCuda lacks (virtual memory, stream memory"
                + " operations, cuLaunchKernelEx)");
    }

    private DriverDirect() {
    }

    /** Binds {@code natives}' native methods to the driver library: null, or why {@code calls} could not be bound. */
    private static String bind(Class<?> natives, String calls) {
        try {
            Native.register(natives, "libcuda.so.1");
            return null;
        } catch (LinkageError | RuntimeException e) {
            return calls + " could not be bound through JNA: " + e;
        }
    }

    static native int cuMemGetAllocationGranularity(long[] granularity, byte[] prop, int option);

    static native int cuMemCreate(long[] handle, long size, byte[] prop, long flags);

    static native int cuMemAddressReserve(long[] address, long size, long alignment, long fixedAddress, long flags);

    static native int cuMemMap(long address, long size, long offset, long handle, long flags);

    static native int cuMemSetAccess(long address, long size, byte[] descriptions, long count);

    static native int cuMemUnmap(long address, long size);

    static native int cuMemAddressFree(long address, long size);

    static native int cuMemRelease(long handle);

    static native int cuMemExportToShareableHandle(int[] shareableHandle, long handle, int handleType, long flags);

    /** {@code osHandle} is the descriptor itself, passed where C passes {@code (void *)(uintptr_t) fd}. */
    static native int cuMemImportFromShareableHandle(long[] handle, long osHandle, int handleType);

    /** {@code stream} is a CUstream and {@code paramArray} a CUstreamBatchMemOpParams*. */
    static native int cuStreamBatchMemOp_v2(long stream, int count, long paramArray, int flags);

    /** {@code config} is a CUlaunchConfig*, {@code f} a CUfunction, {@code kernelParams} a void**. */
    static native int cuLaunchKernelEx(long config, long f, long kernelParams, long extra);

    /**
     * The graph calls, registered apart: {@code cuGraphExecKernelNodeSetParams_v2} came with CUDA 12.0's
     * driver, and an older driver that lacks it must not take the calls above down with it.
     */
    static final class Graphs {
        /** Null where both calls could be bound, else why not. */
        static final String UNAVAILABLE;

        static {
            UNAVAILABLE = DriverDirect.UNAVAILABLE != null ? DriverDirect.UNAVAILABLE
                    : bind(Graphs.class, "the CUDA driver's graph kernel node update (cuGraphExecKernelNodeSetParams_v2, CUDA 12)");
        }

        private Graphs() {
        }

        /** {@code nodeParams} is a CUDA_KERNEL_NODE_PARAMS_v2*. */
        static native int cuGraphExecKernelNodeSetParams_v2(long graphExec, long node, long nodeParams);

        static native int cuGraphLaunch(long graphExec, long stream);
    }
}
