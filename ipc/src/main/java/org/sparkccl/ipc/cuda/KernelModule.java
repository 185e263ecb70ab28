package org.sparkccl.ipc.cuda;

import java.io.IOException;
import java.io.InputStream;
import java.util.Collection;
import java.util.HashMap;
import java.util.Map;
import jcuda.driver.CUfunction;
import jcuda.driver.CUfunction_attribute;
import jcuda.driver.CUlimit;
import jcuda.driver.CUmodule;
import jcuda.driver.JCudaDriver;

/**
 * A kernel image built from ipc/src/main/cuda (a fatbin: SASS for sm_90 and PTX for compute_75,
 * which the driver compiles for other GPUs at load), loaded once per device and image into the
 * device's primary context. The collectives' image is {@link GpuSupport#KERNELS_RESOURCE}; other
 * images (the training kernels) are named by their class-path resource.
 */
public final class KernelModule {
    private static final Map<String, KernelModule> MODULES = new HashMap<>();
    private static final Map<String, byte[]> IMAGES = new HashMap<>();

    private final CudaDevice device;
    private final String resource;
    private final CUmodule module = new CUmodule();
    private final Map<String, CUfunction> functions = new HashMap<>();
    private boolean allLoaded;

    private KernelModule(CudaDevice device, String resource) {
        this.device = device;
        this.resource = resource;
        device.makeCurrent();
        Cuda.check(JCudaDriver.cuModuleLoadData(module, image(resource)), "cuModuleLoadData(" + resource + ")",
                device.where());
    }

    /** The collectives' kernels (ring_kernels.cu) on {@code device}. */
    public static KernelModule forDevice(CudaDevice device) {
        return forDevice(device, GpuSupport.KERNELS_RESOURCE);
    }

    /** The kernels of the fatbin at class-path {@code resource} on {@code device}. */
    public static synchronized KernelModule forDevice(CudaDevice device, String resource) {
        return MODULES.computeIfAbsent(resource + "@" + device.ordinal(), k -> new KernelModule(device, resource));
    }

    public synchronized CUfunction function(String name) {
        CUfunction f = functions.get(name);
        if (f == null) {
            f = new CUfunction();
            Cuda.check(JCudaDriver.cuModuleGetFunction(f, module, name), "cuModuleGetFunction(" + name + " in "
                    + resource + ")", device.where());
            functions.put(name, f);
        }
        return f;
    }

    /**
     * Loads the named kernels now, once per module, and raises the context's per-thread stack to the
     * largest local memory among them. Why: with lazy loading (CUDA 12's default) a kernel is loaded at its
     * first use, and a launch that needs more local memory than the context holds grows it; both wait
     * until every kernel of the context has ended. Where two ranks of this process share the GPU, the
     * other rank's kernel spins until this rank's kernel runs, so such a launch waits for a kernel that
     * waits for it, until the collective's timeout (GpuStreamOrderedTest, 2 ranks as threads on one H200:
     * a stream-ordered Simple reduceScatter, the first Simple call of the test, timed out in 8 of 12 runs).
     * Called when the first communicator on the device connects, before any collective kernel runs.
     */
    public synchronized void loadAll(Collection<String> names) {
        if (allLoaded) {
            return;
        }
        device.makeCurrent();
        long largestLocal = 0;
        for (String name : names) {
            int[] local = new int[1];
            Cuda.check(JCudaDriver.cuFuncGetAttribute(local, CUfunction_attribute.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES,
                    function(name)), "cuFuncGetAttribute(local size of " + name + ")", device.where());
            largestLocal = Math.max(largestLocal, local[0]);
        }
        long[] stack = new long[1];
        Cuda.check(JCudaDriver.cuCtxGetLimit(stack, CUlimit.CU_LIMIT_STACK_SIZE), "cuCtxGetLimit(stack size)",
                device.where());
        if (stack[0] < largestLocal) {
            Cuda.check(JCudaDriver.cuCtxSetLimit(CUlimit.CU_LIMIT_STACK_SIZE, largestLocal),
                    "cuCtxSetLimit(stack size " + largestLocal + " bytes)", device.where());
        }
        allLoaded = true;
    }

    /** The collectives' kernel image, with a 0 byte after it. */
    static byte[] image() {
        return image(GpuSupport.KERNELS_RESOURCE);
    }

    /** The kernel image at {@code resource}, with a 0 byte after it (PTX text needs one; a fatbin ignores it). */
    static synchronized byte[] image(String resource) {
        byte[] image = IMAGES.get(resource);
        if (image == null) {
            try (InputStream in = KernelModule.class.getResourceAsStream(resource)) {
                if (in == null) {
                    throw new IllegalStateException("the sparkccl CUDA kernels " + resource + " were not built into this"
                            + " jar (no nvcc at build time): rebuild with CUDA's nvcc on the PATH or at"
                            + " /usr/local/cuda/bin/nvcc");
                }
                byte[] bytes = in.readAllBytes();
                image = java.util.Arrays.copyOf(bytes, bytes.length + 1);
                IMAGES.put(resource, image);
            } catch (IOException e) {
                throw new IllegalStateException("could not read " + resource + ": " + e, e);
            }
        }
        return image;
    }
}
