package org.sparkccl.ipc.cuda;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import jcuda.driver.CUfunction;
import org.agrona.BufferUtil;
import org.sparkccl.core.jdk.JdkAccess;

/**
 * Kernel launches with programmatic dependent launch ({@code cuLaunchKernelEx} with the attribute
 * {@code CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION}, sm_90 and up): the GPU may start the
 * kernel while the one before it on the stream still runs, once that one's blocks have all executed
 * {@code griddepcontrol.launch_dependents} (or ended); the kernel then holds at
 * {@code griddepcontrol.wait} until its predecessor has completed and its writes are visible. Stream
 * order is kept, and the launch latency of a small kernel overlaps the end of the one before it; in a
 * CUDA graph the capture turns it into a programmatic edge, so the same holds on replay.
 *
 * <p>JCuda 12.0.0 has no {@code cuLaunchKernelEx}: it goes through {@link DriverDirect}. The launch
 * configuration lives in one direct buffer reused by every launch: not thread safe (one per communicator).
 */
public final class ProgrammaticLaunch {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    // CUlaunchConfig (cuda.h, CUDA 12): gridDim x/y/z, blockDim x/y/z, sharedMemBytes (u32 each), then
    // hStream at 32, attrs at 40, numAttrs (u32) at 48; 56 bytes.
    private static final int CONFIG_BYTES = 56;
    private static final int GRID_X = 0;
    private static final int BLOCK_X = 12;
    private static final int STREAM = 32;
    private static final int ATTRS = 40;
    private static final int NUM_ATTRS = 48;
    // CUlaunchAttribute: id (u32), 4 bytes of padding, then a 64-byte union of values; 72 bytes.
    private static final int ATTR_ID = 0;
    private static final int ATTR_VALUE = 8;
    private static final int ATTR_BYTES = 72;
    private static final int CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6;

    private final ByteBuffer block = ByteBuffer.allocateDirect(CONFIG_BYTES + ATTR_BYTES + 8).order(ByteOrder.LITTLE_ENDIAN);
    private final long blockAddress = BufferUtil.address(block);
    private final long paramsAddress;
    private final String where;

    /**
     * Launches will pass {@code kernelArgs} (the kernel's one parameter, a struct in a direct buffer) to
     * the kernel.
     */
    public ProgrammaticLaunch(ByteBuffer kernelArgs, String where) {
        String unavailable = unavailable();
        if (unavailable != null) {
            throw new IllegalStateException(unavailable + " (" + where + ")");
        }
        this.where = where;
        block.putInt(GRID_X + 4, 1);
        block.putInt(GRID_X + 8, 1);
        block.putInt(BLOCK_X + 4, 1);
        block.putInt(BLOCK_X + 8, 1);
        block.putLong(ATTRS, blockAddress + CONFIG_BYTES);
        block.putInt(NUM_ATTRS, 1);
        block.putInt(CONFIG_BYTES + ATTR_ID, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
        block.putInt(CONFIG_BYTES + ATTR_VALUE, 1);
        // kernelParams: an array of one pointer, to the argument struct.
        paramsAddress = blockAddress + CONFIG_BYTES + ATTR_BYTES;
        block.putLong(CONFIG_BYTES + ATTR_BYTES, BufferUtil.address(kernelArgs));
    }

    /** Null where {@code cuLaunchKernelEx} can be called, else why not (no driver library, or no such symbol). */
    public static String unavailable() {
        return DriverDirect.UNAVAILABLE;
    }

    /** Queues {@code function} on {@code stream}, {@code blocks} blocks of {@code threads}, with the arguments given. */
    public void launch(CUfunction function, int blocks, int threads, CudaStream stream) {
        block.putInt(GRID_X, blocks);
        block.putInt(BLOCK_X, threads);
        block.putLong(STREAM, Cuda.handleAddress(stream.handle()));
        int rc = DriverDirect.cuLaunchKernelEx(blockAddress, Cuda.handleAddress(function), paramsAddress, 0L);
        if (rc != 0) {
            Cuda.check(rc, "cuLaunchKernelEx(programmatic stream serialization, " + blocks + " blocks)", where);
        }
    }
}
