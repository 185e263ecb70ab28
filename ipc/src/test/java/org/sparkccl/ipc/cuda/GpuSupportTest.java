package org.sparkccl.ipc.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Paths;
import org.junit.jupiter.api.Test;

/** What a machine without a GPU (CI, the development machines) sees: a reason, and no JCuda. */
class GpuSupportTest {

    @Test
    void withoutTheDriverTheReasonNamesLibcuda() {
        if (GpuSupport.findDriverLibrary() != null) {
            System.out.println("SKIPPED: this machine has libcuda.so.1 (" + GpuSupport.findDriverLibrary() + ")");
            return;
        }
        String reason = GpuSupport.unavailableReason();
        assertNotNull(reason);
        assertTrue(reason.contains("libcuda.so.1"), reason);
        assertEquals(0, GpuSupport.deviceCount());
        assertTrue(!GpuSupport.isAvailable());
    }

    @Test
    void kernelsArePackagedWhereNvccExists() {
        boolean nvcc = Files.isExecutable(Paths.get("/usr/local/cuda/bin/nvcc"));
        String path = System.getenv("PATH");
        if (path != null) {
            for (String dir : path.split(":")) {
                nvcc |= !dir.isEmpty() && Files.isExecutable(Paths.get(dir, "nvcc"));
            }
        }
        if (!nvcc) {
            System.out.println("SKIPPED: no nvcc here, so the build packaged no kernels");
            return;
        }
        assertTrue(GpuSupport.kernelsBuilt(), "nvcc exists but " + GpuSupport.KERNELS_RESOURCE + " is not on the class path");
        byte[] image = KernelModule.image();
        assertEquals(0, image[image.length - 1], "the image handed to cuModuleLoadData ends with a 0 byte");
        assertTrue(image.length > 10_000, "kernel image of " + image.length + " bytes");
    }
}
