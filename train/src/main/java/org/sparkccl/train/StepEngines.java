package org.sparkccl.train;

import org.sparkccl.core.Communicator;

/** The step engines a rank can train with. */
public final class StepEngines {
    private StepEngines() {
    }

    /** Steps on the CPU, the gradient all-reduced from an Arrow buffer. */
    public static StepEngine.Factory cpu() {
        return HostStepEngine.FACTORY;
    }

    /**
     * Steps on GPU {@code deviceOrdinal} (as CUDA numbers this process's GPUs), the gradient
     * all-reduced in device memory over {@code comm}, which must be this rank's GPU communicator.
     */
    public static StepEngine.Factory gpu(Communicator comm, int deviceOrdinal) {
        return GpuStepEngine.on(comm, deviceOrdinal);
    }
}
