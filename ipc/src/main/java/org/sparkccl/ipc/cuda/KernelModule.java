package org.sparkccl.ipc.cuda;

import java.io.IOException;
import java.io.InputStream;
import java.util.HashMap;
import java.util.Map;
import jcuda.driver.CUfunction;
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
