package org.sparkccl.ipc.cuda;

import org.sparkccl.core.memory.HostMemoryBlock;
import org.sparkccl.core.memory.HostMemorySource;
import java.util.concurrent.atomic.AtomicLong;
import jcuda.driver.CUcontext;
import jcuda.driver.CUdevice;
import jcuda.driver.CUresult;
import jcuda.driver.JCudaDriver;

/**
 * Page-locked host memory from CUDA ({@code cuMemHostAlloc}, portable and mapped): GPUs copy it by
 * DMA at full link speed, and kernels read and write it in place through
 * {@link HostMemoryBlock#devicePointer()}, which is how a {@link GradientBuffer} in this memory is
 * all-reduced by a GPU communicator without a copy.
 *
 * <p>Registered with {@link java.util.ServiceLoader} at priority {@value #PRIORITY}, so that
 * {@link HostMemorySources#preferred()} picks it wherever a GPU is usable; the no-argument
 * constructor touches no native code, and {@link #unavailableReason()} asks {@link GpuSupport},
 * which never loads CUDA on a machine without the driver.
 *
 * <p>Which GPU's context allocates: the one current on the calling thread (a Spark task bound to its
 * GPU), else the one given to the constructor (GPU 0 by default). The memory is portable, usable
 * from every GPU. The calling thread's current context is left as it was, on allocation and on
 * free (Arrow frees on whichever thread drops the last reference).
 */
public final class PinnedHostMemorySource implements HostMemorySource {
    public static final String NAME = "cuda-pinned";
    public static final int PRIORITY = 100;

    private final int fallbackOrdinal;
    private final AtomicLong outstanding = new AtomicLong();

    /** Allocates under the calling thread's current GPU, else GPU 0. */
    public PinnedHostMemorySource() {
        this(0);
    }

    /** Allocates under the calling thread's current GPU, else GPU {@code fallbackOrdinal}. */
    public PinnedHostMemorySource(int fallbackOrdinal) {
        this.fallbackOrdinal = fallbackOrdinal;
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public String unavailableReason() {
        String why = GpuSupport.unavailableReason();
        if (why != null) {
            return why;
        }
        if (fallbackOrdinal < 0 || fallbackOrdinal >= GpuSupport.deviceCount()) {
            return "GPU " + fallbackOrdinal + " does not exist here (" + GpuSupport.deviceCount() + " visible)";
        }
        return null;
    }

    @Override
    public int priority() {
        return PRIORITY;
    }

    @Override
    public HostMemoryBlock allocate(long bytes) {
        if (bytes <= 0) {
            throw new IllegalArgumentException("host memory block size must be positive, got " + bytes);
        }
        GpuSupport.require(); // loads the driver binding before anything below touches it
        CUcontext saved = currentContext();
        try {
            // cuMemHostAlloc returns page-aligned memory: Arrow's 64-byte alignment holds.
            PinnedHostBuffer buffer = PinnedHostBuffer.allocate(deviceFor(saved), bytes, "gradient buffer");
            outstanding.addAndGet(bytes);
            return new Block(buffer);
        } finally {
            JCudaDriver.cuCtxSetCurrent(saved);
        }
    }

    @Override
    public long outstandingBytes() {
        return outstanding.get();
    }

    @Override
    public String toString() {
        return NAME;
    }

    private static CUcontext currentContext() {
        CUcontext context = new CUcontext();
        int rc = JCudaDriver.cuCtxGetCurrent(context);
        return rc == CUresult.CUDA_SUCCESS ? context : new CUcontext();
    }

    /** The GPU of {@code current} when it is a context, else the fallback GPU. */
    private CudaDevice deviceFor(CUcontext current) {
        if (!current.equals(new CUcontext())) {
            CUdevice device = new CUdevice();
            if (JCudaDriver.cuCtxGetDevice(device) == CUresult.CUDA_SUCCESS) {
                for (int i = 0; i < GpuSupport.deviceCount(); i++) {
                    CUdevice candidate = new CUdevice();
                    if (JCudaDriver.cuDeviceGet(candidate, i) == CUresult.CUDA_SUCCESS && candidate.equals(device)) {
                        return CudaDevice.get(i);
                    }
                }
            }
        }
        return CudaDevice.get(fallbackOrdinal);
    }

    private final class Block implements HostMemoryBlock {
        private final PinnedHostBuffer buffer;
        private boolean freed;

        Block(PinnedHostBuffer buffer) {
            this.buffer = buffer;
        }

        @Override
        public long address() {
            return buffer.address();
        }

        @Override
        public long size() {
            return buffer.size();
        }

        @Override
        public long devicePointer() {
            return buffer.devicePointer();
        }

        @Override
        public synchronized void close() {
            if (freed) {
                return;
            }
            freed = true;
            CUcontext saved = currentContext();
            try {
                buffer.close();
            } finally {
                JCudaDriver.cuCtxSetCurrent(saved);
                outstanding.addAndGet(-buffer.size());
            }
        }
    }
}
