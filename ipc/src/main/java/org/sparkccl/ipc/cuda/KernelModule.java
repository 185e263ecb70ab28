package org.sparkccl.ipc.cuda;

import java.io.IOException;
import java.io.InputStream;
import java.util.HashMap;
import java.util.Map;
import jcuda.driver.CUfunction;
import jcuda.driver.CUmodule;
import jcuda.driver.JCudaDriver;

/**
 * The sparkccl kernels (a fatbin: SASS for sm_90 and PTX for compute_75, which the driver compiles
 * for other GPUs at load), loaded once per device into its primary context.
 */
public final class KernelModule {
    private static final Map<Integer, KernelModule> MODULES = new HashMap<>();
    private static byte[] image;

    private final CudaDevice device;
    private final CUmodule module = new CUmodule();
    private final Map<String, CUfunction> functions = new HashMap<>();

    private KernelModule(CudaDevice device) {
        this.device = device;
        device.makeCurrent();
        Cuda.check(JCudaDriver.cuModuleLoadData(module, image()), "cuModuleLoadData(sparkccl kernels)", device.where());
    }

    public static synchronized KernelModule forDevice(CudaDevice device) {
        return MODULES.computeIfAbsent(device.ordinal(), o -> new KernelModule(device));
    }

    public synchronized CUfunction function(String name) {
        CUfunction f = functions.get(name);
        if (f == null) {
            f = new CUfunction();
            Cuda.check(JCudaDriver.cuModuleGetFunction(f, module, name), "cuModuleGetFunction(" + name + ")", device.where());
            functions.put(name, f);
        }
        return f;
    }

    /** The kernel image, with a 0 byte after it (PTX text needs one; a fatbin ignores it). */
    static synchronized byte[] image() {
        if (image == null) {
            try (InputStream in = KernelModule.class.getResourceAsStream(GpuSupport.KERNELS_RESOURCE)) {
                if (in == null) {
                    throw new IllegalStateException("the sparkccl CUDA kernels were not built into this jar (no nvcc at "
                            + "build time): rebuild with CUDA's nvcc on the PATH or at /usr/local/cuda/bin/nvcc");
                }
                byte[] bytes = in.readAllBytes();
                image = java.util.Arrays.copyOf(bytes, bytes.length + 1);
            } catch (IOException e) {
                throw new IllegalStateException("could not read " + GpuSupport.KERNELS_RESOURCE + ": " + e, e);
            }
        }
        return image;
    }
}
