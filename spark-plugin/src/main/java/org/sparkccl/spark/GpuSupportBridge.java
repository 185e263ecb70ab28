package org.sparkccl.spark;

/**
 * What this module asks of the ipc module's GPU support: how many GPUs this process sees, the
 * UUID of one, and preparing CUDA once per executor. It holds no CUDA code itself.
 *
 * <p>Until the ipc GPU backend is part of the build, this process sees no GPUs and every rank
 * works in host memory; GPU addresses that Spark assigns are still recorded and checked.
 */
final class GpuSupportBridge {
    private GpuSupportBridge() {
    }

    /** GPUs this process can use; 0 without CUDA. */
    static int visibleDevices() {
        return 0;
    }

    /** The UUID of device {@code ordinal}, or null where CUDA cannot tell it. */
    static String uuid(int ordinal) {
        return null;
    }

    /** Why GPUs cannot be used here, or null when they can. */
    static String unavailableReason() {
        return "this sparkccl build has no GPU backend";
    }

    /** Initialises CUDA in this process, once; a no-op where there is no GPU. */
    static void prepare() {
    }

    /** Releases what {@link #prepare()} set up. */
    static void release() {
    }
}
