package org.sparkccl.ipc.gpu;

import java.util.function.BooleanSupplier;
import org.sparkccl.core.Bootstrap;
import org.sparkccl.core.param.Params;
import org.sparkccl.ipc.cuda.GpuSupport;

/**
 * Builds the GPU engine over the ranks of one host, typed, for code that uses its own calls (the
 * stream-ordered ones, its device and stream). Over one host or several, and to choose between the
 * GPU and host engines, use core's {@link org.sparkccl.core.engine.Engines}.
 */
public final class GpuCommunicators {
    private GpuCommunicators() {
    }

    /**
     * A communicator whose rank runs on GPU {@code deviceOrdinal} (as CUDA numbers this process's
     * visible GPUs). Every rank calls this together: it makes exactly one {@code allGather} on the
     * bootstrap. Throws with the reason where GPUs cannot be used ({@link GpuSupport#unavailableReason()}).
     */
    public static GpuCommunicator create(Bootstrap bootstrap, int deviceOrdinal, Params params) {
        return create(bootstrap, deviceOrdinal, params, () -> false);
    }

    /**
     * As {@link #create(Bootstrap, int, Params)}; {@code cancelled} (Spark's task-killed flag) is polled
     * while a collective runs: when it turns true the kernel is asked to stop, every rank's collective
     * ends with an error instead of waiting for the timeout, and the communicator is unusable. Once
     * stream-ordered calls are made it is also polled from the communicator's watcher thread
     * ({@link GpuPeerWatcher}), so it must not depend on the calling thread (Spark's
     * {@code TaskContext::isInterrupted} on the task's context object does not).
     */
    public static GpuCommunicator create(Bootstrap bootstrap, int deviceOrdinal, Params params, BooleanSupplier cancelled) {
        GpuSupport.require();
        return GpuCommunicator.create(bootstrap, deviceOrdinal, params, cancelled);
    }
}
