package org.sparkccl.ipc.cuda;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.agrona.BufferUtil;
import org.sparkccl.core.jdk.JdkAccess;

/**
 * A stream memory write and wait queued together as one driver call ({@code cuStreamBatchMemOp}): the
 * stream writes a 32-bit word once the work queued before it is done (with a memory barrier, so that
 * work's results are visible first), then holds the work queued after it until another word has
 * reached at least a value (a cyclic comparison, as CUDA's {@code CU_STREAM_WAIT_VALUE_GEQ}). One call of
 * about a microsecond of host time, where {@code cuStreamWriteValue32} and {@code cuStreamWaitValue32}
 * are one each (0.8-1.2 us apiece on the H200 machine, GpuFloorsBench (v)).
 *
 * <p>JCuda 12.0.0 binds the single operations but not the batch (its {@code CUstreamBatchMemOpParams}
 * has no fields), so the batch goes through {@link DriverDirect}. The parameters live in one direct
 * buffer, reused by every call: not thread safe.
 */
public final class StreamMemOps {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    // CUstreamBatchMemOpParams (cuda.h, CUDA 12): a union of 48 bytes; its waitValue and writeValue
    // members are {operation u32, pad, address u64, value u32 (or value64), flags u32, pad, alias u64}.
    private static final int PARAMS_BYTES = 48;
    private static final int OPERATION = 0;
    private static final int ADDRESS = 8;
    private static final int VALUE = 16;
    private static final int FLAGS = 24;
    private static final int CU_STREAM_MEM_OP_WAIT_VALUE_32 = 1;
    private static final int CU_STREAM_MEM_OP_WRITE_VALUE_32 = 2;
    private static final int CU_STREAM_WAIT_VALUE_GEQ = 0;
    private static final int CU_STREAM_WRITE_VALUE_DEFAULT = 0;

    private final ByteBuffer params = ByteBuffer.allocateDirect(2 * PARAMS_BYTES).order(ByteOrder.LITTLE_ENDIAN);
    private final long paramsAddress = BufferUtil.address(params);
    private final String where;

    /** Writes go to {@code writeAddress}, waits look at {@code waitAddress} (device addresses, 4-byte aligned). */
    public StreamMemOps(long writeAddress, long waitAddress, String where) {
        String unavailable = unavailable();
        if (unavailable != null) {
            throw new IllegalStateException(unavailable + " (" + where + ")");
        }
        this.where = where;
        params.putInt(OPERATION, CU_STREAM_MEM_OP_WRITE_VALUE_32);
        params.putLong(ADDRESS, writeAddress);
        params.putInt(FLAGS, CU_STREAM_WRITE_VALUE_DEFAULT);
        params.putInt(PARAMS_BYTES + OPERATION, CU_STREAM_MEM_OP_WAIT_VALUE_32);
        params.putLong(PARAMS_BYTES + ADDRESS, waitAddress);
        params.putInt(PARAMS_BYTES + FLAGS, CU_STREAM_WAIT_VALUE_GEQ);
    }

    /** Null where the batch call can be made, else why not (no driver library, or no such symbol in it). */
    public static String unavailable() {
        return DriverDirect.UNAVAILABLE;
    }

    /** Queues on {@code stream}: write {@code value}, then wait until the other word is at least {@code atLeast}. */
    public void writeThenWait(CudaStream stream, int value, int atLeast) {
        params.putInt(VALUE, value);
        params.putInt(PARAMS_BYTES + VALUE, atLeast);
        int rc = DriverDirect.cuStreamBatchMemOp_v2(Cuda.handleAddress(stream.handle()), 2, paramsAddress, 0);
        if (rc != 0) {
            Cuda.check(rc, "cuStreamBatchMemOp(write, wait)", where);
        }
    }
}
