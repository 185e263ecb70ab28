package org.sparkccl.train;

import java.util.Locale;
import org.sparkccl.core.MemoryKind;

/**
 * Where a rank computes its training steps. A rank whose communicator is a GPU one (Spark gave the
 * task a GPU and CUDA works in its executor) trains on that GPU unless the user asks for the CPU;
 * any other rank trains on the CPU. Every rank decides from its own communicator, and the ranks of
 * a stage all have the same kind (a mixed stage fails when the communicator is built), so they
 * decide alike.
 */
public enum ComputePath {
    /** Gradients on the CPU, all-reduced from an Arrow buffer in host (or mapped pinned) memory. */
    CPU,
    /** Gradients, all-reduce and update on the rank's GPU, in device memory. */
    GPU;

    /** What the user asked for ({@code --compute}). */
    public enum Choice {
        /** The GPU where the rank has a GPU communicator, else the CPU. */
        AUTO,
        CPU,
        /** The GPU, or fail where a rank has none. */
        GPU;

        public static Choice parse(String text) {
            try {
                return valueOf(text.trim().toUpperCase(Locale.ROOT));
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException("unknown compute choice '" + text + "': use auto, cpu or gpu");
            }
        }
    }

    /** The path of rank {@code rank}, whose communicator takes {@code communicatorMemory} addresses. */
    public static ComputePath choose(Choice requested, MemoryKind communicatorMemory, int rank) {
        boolean gpuCommunicator = communicatorMemory == MemoryKind.DEVICE;
        switch (requested) {
            case CPU:
                return CPU;
            case GPU:
                if (!gpuCommunicator) {
                    throw new IllegalStateException("rank " + rank + ": --compute gpu, but this rank's communicator works"
                            + " in host memory (Spark gave the task no GPU, or CUDA does not work in its executor: the"
                            + " executor log says why); use --compute auto or cpu, or give every task a GPU");
                }
                return GPU;
            default:
                return gpuCommunicator ? GPU : CPU;
        }
    }
}
