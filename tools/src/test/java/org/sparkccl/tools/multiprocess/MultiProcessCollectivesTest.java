package org.sparkccl.tools.multiprocess;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.Set;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.sparkccl.tools.launch.LaunchResult;
import org.sparkccl.tools.launch.RankLauncher;

/**
 * N ranks as N forked JVMs, all-reducing random data over shared memory: every type, op, protocol,
 * the counts 1, 7, 1023, 65537 (and 4 Mi + 3 for some groups and types), in and out of place, plus
 * reduce-scatter, all-gather, broadcast and barrier. Every rank's result must match the float64 (or
 * exact integer) reference within the type's tolerance and be bit for bit the same on every rank.
 */
class MultiProcessCollectivesTest {
    /** Groups that also run the 4 Mi + 3 count: enough to cover odd and even rings, cheap enough for 2 cores. */
    private static final Set<Integer> LARGE_GROUPS = Set.of(2, 3);

    @ParameterizedTest(name = "{0} ranks")
    @ValueSource(ints = {1, 2, 3, 4, 5, 8})
    void everyCollectiveMatchesTheReferenceAndIsIdenticalOnEveryRank(int n) {
        boolean large = LARGE_GROUPS.contains(n);
        long start = System.nanoTime();
        RankReports reports = RankReports.run(RankLauncher.of(n, CollectiveMatrixRank.class.getName())
                .args(large ? "large" : "small")
                .jvmOptions("-XX:+UseSerialGC", "-Xmx256m")
                .output(null, System.err)
                .timeout(Duration.ofMinutes(8)));
        LaunchResult result = reports.result;
        System.out.printf("%d ranks: %.1f s%n", n, (System.nanoTime() - start) / 1e9);
        if (!result.succeeded()) {
            StringBuilder tails = new StringBuilder();
            for (int r = 0; r < n; r++) {
                tails.append("\n--- rank ").append(r).append(" ---\n")
                        .append(String.join("\n", result.outputTail(r).subList(
                                Math.max(0, result.outputTail(r).size() - 30), result.outputTail(r).size())));
            }
            fail(result.failure() + tails);
        }

        reports.assertEveryCaseRightAndAlike(n, CollectiveMatrixRank.PROTOCOLS.size()
                * CollectiveMatrixRank.casesPerProtocol(large));
        assertEquals(0, DevShm.leftoversOf(result).size(), "left in /dev/shm: " + DevShm.leftoversOf(result));
    }
}
