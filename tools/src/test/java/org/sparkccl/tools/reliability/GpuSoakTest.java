package org.sparkccl.tools.reliability;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.sparkccl.ipc.cuda.GpuSupport;

/**
 * The soak on GPUs ({@link SoakRank} in gpu mode): 2 ranks as processes over CUDA IPC, one per GPU
 * where there are two, else both on one GPU. {@code sparkccl.gpuSoakCalls} random collectives
 * (10,000 by default) of random kind, size, type, op and communicator (auto, ring LL, ring Simple,
 * one-shot, and ring LL128 on one GPU): every result matches the float64 reference, every rank ends
 * with the same digest, device and pinned bytes go back to zero, and descriptors, mappings and threads do
 * not grow. GPU memory in use (cuMemGetInfo) does not grow while the calls run, and the second of two
 * rounds (each making, using and closing every communicator) ends where the first did: what CUDA sets
 * up once per process on first use (about 100 MiB on the H200 with these kernels) is not counted as a
 * leak, a communicator that leaves memory behind is.
 */
@Tag("gpu")
class GpuSoakTest {
    /** cuMemGetInfo counts in 2 MiB pages, for every process on the GPU. */
    private static final long CALL_SLACK = 8L << 20;
    private static final long ROUND_SLACK = 8L << 20;

    @Test
    void randomCollectivesOnTwoGpuRanks() {
        String reason = GpuSupport.unavailableReason();
        Assumptions.assumeTrue(reason == null, "no GPU: " + reason);
        int calls = Integer.getInteger("sparkccl.gpuSoakCalls", 10_000);
        Map<Integer, List<String>> lines = SoakTest.soak("gpu", 2, calls, Math.max(1, calls / 10));
        for (Map.Entry<Integer, List<String>> rank : lines.entrySet()) {
            int r = rank.getKey();
            List<Long> running = values(rank.getValue(), "GPUSAMPLE ");
            List<Long> rounds = values(rank.getValue(), "GPUROUND ");
            long before = Long.parseLong(SoakTest.only(rank.getValue(), "GPUMEM ", r).split(" ")[1]);
            System.out.println("rank " + r + ": GPU memory in use " + mib(before) + " before, while running "
                    + running.stream().map(GpuSoakTest::mib).collect(Collectors.joining(", ")) + ", after each round "
                    + rounds.stream().map(GpuSoakTest::mib).collect(Collectors.joining(", ")));
            assertEquals(2, rounds.size(), "rank " + r + ": two rounds");
            long firstRunning = running.get(0);
            for (long now : running) {
                assertTrue(now <= firstRunning + CALL_SLACK, "rank " + r + ": GPU memory in use grew while the "
                        + "communicators ran, from " + mib(firstRunning) + " to " + mib(now));
            }
            assertTrue(rounds.get(1) <= rounds.get(0) + ROUND_SLACK, "rank " + r + ": GPU memory in use after closing "
                    + "every communicator grew from " + mib(rounds.get(0)) + " (first round) to " + mib(rounds.get(1))
                    + " (second round): something of a closed communicator stays on the GPU");
        }
    }

    private static List<Long> values(List<String> lines, String prefix) {
        return lines.stream().filter(l -> l.startsWith(prefix)).map(l -> Long.parseLong(l.split(" ")[2]))
                .collect(Collectors.toList());
    }

    private static String mib(long bytes) {
        return (bytes >> 20) + " MiB";
    }
}
