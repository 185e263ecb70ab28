package org.sparkccl.ipc.cuda;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import jcuda.driver.CUresult;
import jcuda.driver.JCudaDriver;

/**
 * Whether this process can use GPUs, decided once and lazily: a machine without the NVIDIA driver
 * never loads JCuda at all. {@link #unavailableReason()} says why not (no libcuda, no device,
 * kernels not built), for logs and for tests that skip.
 */
public final class GpuSupport {
    /** The kernels built from ipc/src/main/cuda, packaged by the Maven build where nvcc exists. */
    public static final String KERNELS_RESOURCE = "/org/sparkccl/ipc/cuda/sparkccl_kernels.fatbin";
    private static final String[] LIBRARY_DIRS = {
        "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/lib/x86_64-linux-gnu", "/lib64",
        "/usr/local/nvidia/lib64", "/usr/local/nvidia/lib", "/usr/lib/wsl/lib",
    };

    private static String reason;
    private static int deviceCount;
    private static boolean probed;

    private GpuSupport() {
    }

    /** Null when GPUs can be used here; otherwise why not. */
    public static synchronized String unavailableReason() {
        probe();
        return reason;
    }

    public static boolean isAvailable() {
        return unavailableReason() == null;
    }

    /** Visible CUDA devices (0 where GPUs cannot be used). */
    public static synchronized int deviceCount() {
        probe();
        return deviceCount;
    }

    /** Throws with the reason when GPUs cannot be used. */
    public static void require() {
        String r = unavailableReason();
        if (r != null) {
            throw new IllegalStateException("GPUs cannot be used here: " + r);
        }
    }

    /** True when the build packaged the kernels (nvcc was found). */
    public static boolean kernelsBuilt() {
        return GpuSupport.class.getResource(KERNELS_RESOURCE) != null;
    }

    private static void probe() {
        if (probed) {
            return;
        }
        probed = true;
        String library = findDriverLibrary();
        if (library == null) {
            reason = "no NVIDIA driver here: libcuda.so.1 is neither in the loader cache nor in LD_LIBRARY_PATH nor in "
                    + String.join(", ", LIBRARY_DIRS);
            return;
        }
        try {
            JCudaLoader.load();
        } catch (Throwable e) {
            reason = "JCuda's driver binding did not load (" + e + "); libcuda.so.1 was found in " + library;
            return;
        }
        int init = JCudaDriver.cuInit(0);
        if (init != CUresult.CUDA_SUCCESS) {
            reason = "cuInit failed with " + Cuda.errorName(init) + " (" + init + "): the driver sees no usable GPU"
                    + visibleDevicesNote();
            return;
        }
        int[] count = new int[1];
        int rc = JCudaDriver.cuDeviceGetCount(count);
        if (rc != CUresult.CUDA_SUCCESS || count[0] == 0) {
            reason = "no CUDA device visible" + visibleDevicesNote();
            return;
        }
        if (!kernelsBuilt()) {
            reason = "the sparkccl CUDA kernels were not built into this jar (nvcc was not found when it was built): "
                    + "build with CUDA's nvcc on the PATH or at /usr/local/cuda/bin/nvcc";
            return;
        }
        deviceCount = count[0];
    }

    private static String visibleDevicesNote() {
        String v = System.getenv("CUDA_VISIBLE_DEVICES");
        return v == null ? "" : " (CUDA_VISIBLE_DEVICES=" + v + ")";
    }

    /** Where libcuda.so.1 is, or null; looks without loading anything. */
    static String findDriverLibrary() {
        List<String> dirs = new ArrayList<>();
        String ld = System.getenv("LD_LIBRARY_PATH");
        if (ld != null) {
            for (String d : ld.split(":")) {
                if (!d.isEmpty()) {
                    dirs.add(d);
                }
            }
        }
        for (String d : LIBRARY_DIRS) {
            dirs.add(d);
        }
        for (String d : dirs) {
            Path p = Paths.get(d, "libcuda.so.1");
            if (Files.exists(p)) {
                return p.toString();
            }
        }
        try {
            byte[] cache = Files.readAllBytes(Paths.get("/etc/ld.so.cache"));
            if (new String(cache, StandardCharsets.ISO_8859_1).contains("libcuda.so.1")) {
                return "/etc/ld.so.cache";
            }
        } catch (IOException | RuntimeException e) {
            // No loader cache: only the directories count.
        }
        return null;
    }
}
