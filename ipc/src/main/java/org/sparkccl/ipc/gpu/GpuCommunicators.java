package org.sparkccl.ipc.gpu;

import org.sparkccl.core.Bootstrap;
import org.sparkccl.core.param.Params;
import org.sparkccl.ipc.cuda.GpuSupport;

/** Builds GPU communicators; the entry point for tools, tests and the Spark plugin. */
public final class GpuCommunicators {
    private GpuCommunicators() {
    }

    /**
     * A communicator whose rank runs on GPU {@code deviceOrdinal} (as CUDA numbers this process's
     * visible GPUs). Every rank calls this together: it makes exactly one {@code allGather} on the
     * bootstrap. Throws with the reason where GPUs cannot be used ({@link GpuSupport#unavailableReason()}).
     */
    public static GpuCommunicator create(Bootstrap bootstrap, int deviceOrdinal, Params params) {
        GpuSupport.require();
        return GpuCommunicator.create(bootstrap, deviceOrdinal, params);
    }

    /** Null when GPUs can be used here, otherwise why not. */
    public static String unavailableReason() {
        return GpuSupport.unavailableReason();
    }
}
