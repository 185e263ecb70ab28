package org.sparkccl.spark;

import java.util.function.BooleanSupplier;
import org.sparkccl.core.Bootstrap;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.engine.Communicators;
import org.sparkccl.ipc.gpu.GpuEngines;

/**
 * Chooses the engine for a rank: the GPU one when the rank has a GPU and this process can use CUDA,
 * else the host one (shared memory between processes, plain memory within one JVM). Only the ipc
 * module's factories are called here, so this module never touches CUDA. Every rank states its
 * engine in its placement, so ranks that would choose differently fail together with the reason.
 */
final class CommunicatorFactory {
    /** The engines a rank can run. */
    enum Engine {
        HOST, GPU
    }

    private CommunicatorFactory() {
    }

    static Engine engineFor(GpuBinding gpu) {
        return gpu.hasGpu() && GpuSupportBridge.unavailableReason() == null ? Engine.GPU : Engine.HOST;
    }

    /**
     * Builds the communicator; {@code cancelled} (Spark's task-killed flag) is polled while a
     * collective waits, by the host engine's wait loop and by the GPU engine's completion poll (which
     * then asks the kernel to stop), so a killed task's peers fail at once instead of at the timeout.
     */
    static Communicator create(Engine engine, Bootstrap bootstrap, GpuBinding gpu, Params params, BooleanSupplier cancelled) {
        if (engine == Engine.GPU) {
            return GpuEngines.create(bootstrap, gpu.ordinal(), params, cancelled); // one host, or two-level across hosts
        }
        return Communicators.host(bootstrap, params, cancelled);
    }
}
