package org.sparkccl.ipc.reliability;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.sparkccl.ipc.cuda.GpuSupport;

/**
 * The soak on GPUs ({@link SoakRank} in gpu mode): 2 ranks as processes over CUDA IPC, one per GPU
 * where there are two, else both on one GPU. {@code sparkccl.gpuSoakCalls} random collectives
 * (10,000 by default) of random kind, size, type, op and communicator (auto, ring LL, ring Simple,
 * one-shot, and ring LL128 on one GPU): every result matches the float64 reference, every rank ends
 * with the same digest, device and pinned bytes go back to zero, descriptors, mappings and threads do
 * not grow, and the GPU memory in use returns to where it was (cuMemGetInfo).
 */
@Tag("gpu")
class GpuSoakTest {
    /** The rank's own CUDA context and kernel module stay loaded until it exits. */
    private static final long GPU_MEMORY_SLACK = 64L << 20;

    @Test
    void randomCollectivesOnTwoGpuRanks() {
        String reason = GpuSupport.unavailableReason();
        Assumptions.assumeTrue(reason == null, "no GPU: " + reason);
        int calls = Integer.getInteger("sparkccl.gpuSoakCalls", 10_000);
        Map<Integer, List<String>> lines = SoakTest.soak("gpu", 2, calls, Math.max(1, calls / 10));
        for (Map.Entry<Integer, List<String>> rank : lines.entrySet()) {
            String[] mem = SoakTest.only(rank.getValue(), "GPUMEM ", rank.getKey()).split(" ");
            long before = Long.parseLong(mem[1]);
            long after = Long.parseLong(mem[2]);
            System.out.println("rank " + rank.getKey() + ": GPU memory in use " + (before >> 20) + " MiB before, "
                    + (after >> 20) + " MiB after closing");
            assertTrue(after <= before + GPU_MEMORY_SLACK, "rank " + rank.getKey() + ": GPU memory in use grew from "
                    + before + " to " + after + " bytes");
        }
    }
}
