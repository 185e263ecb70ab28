package org.sparkccl.tools.reliability;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.sparkccl.tools.launch.LaunchResult;
import org.sparkccl.tools.launch.RankLauncher;
import org.sparkccl.tools.multiprocess.DevShm;

/**
 * Two jobs of 2 ranks each on this machine at the same time, each with its own seed: both get the
 * float64 reference's result in every round (plain and shared buffers), so neither saw the other's
 * memory, and neither leaves anything in /dev/shm.
 */
class ConcurrentJobsTest {

    @Test
    void twoJobsAtOnceNeverSeeEachOthersBuffers() throws Exception {
        CompletableFuture<LaunchResult> a = CompletableFuture.supplyAsync(() -> job(1_000));
        CompletableFuture<LaunchResult> b = CompletableFuture.supplyAsync(() -> job(2_000_000));
        for (LaunchResult result : new LaunchResult[] {a.get(5, TimeUnit.MINUTES), b.get(5, TimeUnit.MINUTES)}) {
            assertTrue(result.succeeded(), result.failure());
            for (int r = 0; r < result.size(); r++) {
                assertEquals(0, result.exitCode(r), "rank " + r + ": " + result.outputTail(r));
            }
            assertEquals(List.of(), DevShm.leftoversOf(result));
        }
    }

    private static LaunchResult job(long seed) {
        return RankLauncher.of(2, JobRank.class.getName())
                .args(Long.toString(seed), "200")
                .jvmOptions("-XX:+UseSerialGC", "-Xmx128m", "-XX:TieredStopAtLevel=1")
                .output(null, System.err)
                .timeout(Duration.ofMinutes(3))
                .run();
    }
}
