package org.sparkccl.ipc.cuda;

import jcuda.driver.CUresult;
import jcuda.driver.CUstream;
import jcuda.driver.CUstreamCaptureStatus;
import jcuda.driver.CUstream_flags;
import jcuda.driver.JCudaDriver;

/**
 * A non-blocking stream: it never waits for the legacy default stream, so another rank of this
 * process doing a synchronous copy cannot stall behind a collective kernel that waits for it.
 */
public final class CudaStream extends NativeResource {
    private final CudaDevice device;
    private final CUstream stream = new CUstream();
    private final String where;
    /**
     * True once the raw handle has been handed out (everything that queues work on this stream takes it)
     * since {@link #awaitQueuedWork} last found the stream idle: until then nothing can have been queued.
     */
    private volatile boolean handedOut = true;

    public CudaStream(CudaDevice device, String where) {
        super(device);
        this.device = device;
        this.where = where;
        device.makeCurrent();
        Cuda.check(JCudaDriver.cuStreamCreate(stream, CUstream_flags.CU_STREAM_NON_BLOCKING), "cuStreamCreate", where);
    }

    public CUstream handle() {
        handedOut = true;
        return stream;
    }

    public CudaDevice device() {
        return device;
    }

    /** True when all work queued on the stream is done; throws when it failed. */
    public boolean isIdle() {
        int rc = JCudaDriver.cuStreamQuery(stream);
        if (rc == CUresult.CUDA_ERROR_NOT_READY) {
            return false;
        }
        Cuda.check(rc, "cuStreamQuery", where);
        return true;
    }

    /**
     * Returns once the work queued on this stream so far is done, asking the driver only when work may have
     * been queued since it was last found idle here (a driver query cost several microseconds on the H200
     * machine, as much as a whole small collective's host side). Not for streams other threads queue on at
     * the same time.
     */
    public void awaitQueuedWork() {
        if (!handedOut) {
            return;
        }
        handedOut = false;
        if (!isIdle()) {
            synchronize();
        }
    }

    public void synchronize() {
        Cuda.check(JCudaDriver.cuStreamSynchronize(stream), "cuStreamSynchronize", where);
    }

    /** Makes work queued on this stream from now on wait for {@code event}'s last record. */
    public void waitFor(CudaEvent event) {
        handedOut = true;
        Cuda.check(JCudaDriver.cuStreamWaitEvent(stream, event.handle(), 0), "cuStreamWaitEvent", where);
    }

    /** True while the stream's work is being captured into a CUDA graph (then it runs nothing). */
    public boolean isCapturing() {
        int[] status = new int[1];
        Cuda.check(JCudaDriver.cuStreamIsCapturing(stream, status), "cuStreamIsCapturing", where);
        return status[0] != CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE;
    }

    @Override
    protected void release() {
        Cuda.check(JCudaDriver.cuStreamDestroy(stream), "cuStreamDestroy", where);
    }
}
