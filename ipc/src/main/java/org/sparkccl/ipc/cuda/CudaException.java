package org.sparkccl.ipc.cuda;

import org.sparkccl.core.CclException;

/** A CUDA driver call failed: the message names the call, its result, the GPU and the rank. */
public final class CudaException extends CclException {
    private final int result;

    public CudaException(String call, int result, String where) {
        super(call + " failed with " + Cuda.errorName(result) + " (" + result + ")" + (where.isEmpty() ? "" : " on " + where));
        this.result = result;
    }

    /** The CUresult code. */
    public int result() {
        return result;
    }
}
