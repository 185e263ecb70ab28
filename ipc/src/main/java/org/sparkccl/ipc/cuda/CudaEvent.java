package org.sparkccl.ipc.cuda;

import jcuda.driver.CUevent;
import jcuda.driver.CUevent_flags;
import jcuda.driver.JCudaDriver;

/**
 * A CUDA event without timing: a point in one stream's work that another stream can wait for
 * ({@link CudaStream#waitFor}) or the host can wait for ({@link #synchronize}).
 */
public final class CudaEvent extends NativeResource {
    private final CUevent event = new CUevent();
    private final String where;

    public CudaEvent(CudaDevice device, String where) {
        super(device);
        this.where = where;
        device.makeCurrent();
        Cuda.check(JCudaDriver.cuEventCreate(event, CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate", where);
    }

    CUevent handle() {
        return event;
    }

    /** Marks the end of the work queued on {@code stream} so far. */
    public void record(CudaStream stream) {
        Cuda.check(JCudaDriver.cuEventRecord(event, stream.handle()), "cuEventRecord", where);
    }

    /** Returns when the work before the last {@link #record} is done. */
    public void synchronize() {
        Cuda.check(JCudaDriver.cuEventSynchronize(event), "cuEventSynchronize", where);
    }

    @Override
    protected void release() {
        Cuda.check(JCudaDriver.cuEventDestroy(event), "cuEventDestroy", where);
    }
}
