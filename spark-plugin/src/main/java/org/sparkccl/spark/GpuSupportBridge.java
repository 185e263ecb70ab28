package org.sparkccl.spark;

import org.sparkccl.ipc.cuda.GpuSupport;
import org.sparkccl.ipc.gpu.GpuCommunicators;

/**
 * What this module asks of the ipc module's GPU support: whether CUDA works in this process and how
 * many GPUs it sees. The first question loads the NVIDIA driver binding and initialises CUDA, once
 * per process (and only where libcuda exists: a machine without the driver never loads JCuda); the
 * executor plugin asks it at start so that the first task does not pay for it. No CUDA call is
 * made here.
 */
final class GpuSupportBridge {
    private GpuSupportBridge() {
    }

    /** Why GPUs cannot be used in this process, or null when they can. */
    static String unavailableReason() {
        return GpuCommunicators.unavailableReason();
    }

    /** GPUs this process can use; 0 without CUDA. */
    static int visibleDevices() {
        return GpuSupport.deviceCount();
    }
}
