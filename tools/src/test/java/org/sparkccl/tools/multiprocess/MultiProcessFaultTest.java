package org.sparkccl.tools.multiprocess;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.sparkccl.tools.launch.LaunchResult;
import org.sparkccl.tools.launch.RankLauncher;

/**
 * Failures across processes: a rank SIGKILLed mid-collective, and ranks that disagree on a call.
 * Nothing may hang (the launches have a generous limit as a guard), every rank must report the
 * failure, and /dev/shm must hold nothing of the launch afterwards.
 */
class MultiProcessFaultTest {
    /** The bound: survivors fail naming the dead rank within 10 s of its death. */
    private static final long DETECTION_BOUND_MS = 10_000;

    @ParameterizedTest(name = "{0} ranks, rank {1} killed, {2} floats, {3} buffers")
    @CsvSource({"3, 1, 1048576, plain", "4, 0, 1000, plain", "2, 1, 1048576, shared"})
    void aRankKilledMidCollectiveIsNamedByEveryOtherRank(int n, int victim, int count, String buffers) {
        Map<Integer, List<String>> lines = new ConcurrentHashMap<>();
        LaunchResult result = RankLauncher.of(n, FaultRank.class.getName())
                .args("kill", Integer.toString(victim), Integer.toString(count), buffers)
                .jvmOptions("-XX:+UseSerialGC", "-Xmx128m")
                .output(null, System.err)
                .onLine((rank, stderr, line) -> lines.computeIfAbsent(rank, r -> new CopyOnWriteArrayList<>()).add(line))
                // Survivors end by themselves once they have reported; the launcher only stops stragglers.
                .survivorGrace(Duration.ofSeconds(60))
                .timeout(Duration.ofMinutes(3))
                .run();

        RankLines.assertSurvivorsNamed(result, lines, n, victim, DETECTION_BOUND_MS);
        assertEquals(List.of(), DevShm.leftoversOf(result));
    }

    @Test
    void ranksThatDisagreeOnCountOrTypeAllFailInsteadOfHanging() {
        int n = 4;
        Map<Integer, List<String>> lines = new ConcurrentHashMap<>();
        LaunchResult result = RankLauncher.of(n, FaultRank.class.getName())
                .args("mismatch")
                .jvmOptions("-XX:+UseSerialGC", "-Xmx128m")
                .output(null, System.err)
                .onLine((rank, stderr, line) -> lines.computeIfAbsent(rank, r -> new CopyOnWriteArrayList<>()).add(line))
                .timeout(Duration.ofMinutes(3))
                .run();
        for (int r = 0; r < n; r++) {
            for (String variant : new String[] {"count", "type"}) {
                String caught = RankLines.find(lines, r, "CAUGHT " + variant + " ");
                System.out.println("rank " + r + ": " + caught);
            }
        }
        assertTrue(result.succeeded(), result.failure());
        // The two ranks that compare headers with the odd one out name both calls.
        for (int r : new int[] {0, n - 1}) {
            String count = RankLines.find(lines, r, "CAUGHT count ");
            assertTrue(count.contains("collective mismatch") && count.contains("1000") && count.contains("1001"), count);
            String type = RankLines.find(lines, r, "CAUGHT type ");
            assertTrue(type.contains("collective mismatch") && type.contains("float") && type.contains("int32"), type);
        }
        assertEquals(List.of(), DevShm.leftoversOf(result));
    }
}
