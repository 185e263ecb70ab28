package org.sparkccl.train.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Assumptions;
import org.sparkccl.core.bootstrap.ThreadGroupBootstrap;
import org.sparkccl.core.param.Params;
import org.sparkccl.ipc.cuda.DeviceBuffer;
import org.sparkccl.ipc.cuda.GpuSupport;
import org.sparkccl.ipc.cuda.PinnedHostBuffer;
import org.sparkccl.ipc.gpu.GpuCommunicator;
import org.sparkccl.ipc.gpu.GpuCommunicators;

/** Skips without a GPU (printing why) and runs GPU ranks as threads of this JVM. */
final class GpuTrainTestSupport {
    private GpuTrainTestSupport() {
    }

    static void assumeGpu() {
        String reason = GpuSupport.unavailableReason();
        if (reason != null) {
            System.out.println("SKIPPED (no GPU): " + reason);
            Assumptions.abort("no GPU: " + reason);
        }
    }

    /** One rank's work; {@code bootstrap.barrier()} before freeing device memory (see GpuModelTrainer). */
    @FunctionalInterface
    interface RankBody<T> {
        T run(GpuCommunicator comm, ThreadGroupBootstrap bootstrap) throws Exception;
    }

    /**
     * {@code ranks} threads, rank r on GPU r mod min(2, visible GPUs), each with a GPU communicator;
     * returns their results by rank and checks afterwards that they left no device or pinned memory allocated.
     */
    static <T> List<T> runRanks(int ranks, RankBody<T> body) throws Exception {
        int gpus = Math.min(2, GpuSupport.deviceCount());
        if (ranks > gpus) {
            System.out.println("NOTE: " + gpus + " GPU(s) here for " + ranks + " ranks: rank r runs on GPU r mod " + gpus);
        }
        long deviceBefore = DeviceBuffer.outstandingBytes();
        long pinnedBefore = PinnedHostBuffer.outstandingBytes();
        ThreadGroupBootstrap.Group group = new ThreadGroupBootstrap.Group(ranks, Duration.ofSeconds(60));
        List<T> results = group.run(bootstrap -> {
            try (GpuCommunicator comm = GpuCommunicators.create(bootstrap, bootstrap.rank() % gpus, Params.fromEnvironment())) {
                return body.run(comm, bootstrap);
            }
        }, Duration.ofMinutes(2));
        // Counted from this run's start, so that another test's leak is not blamed on this one.
        assertEquals(deviceBefore, DeviceBuffer.outstandingBytes(), "device memory leaked");
        assertEquals(pinnedBefore, PinnedHostBuffer.outstandingBytes(), "pinned memory leaked");
        return results;
    }
}
