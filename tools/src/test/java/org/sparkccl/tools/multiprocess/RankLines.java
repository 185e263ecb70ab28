package org.sparkccl.tools.multiprocess;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import org.sparkccl.tools.launch.LaunchResult;

/** What launched ranks printed, line by line, and the checks the fault tests make on it. */
final class RankLines {
    private RankLines() {
    }

    /** Rank {@code rank}'s first line starting with {@code prefix}; fails listing what it printed. */
    static String find(Map<Integer, List<String>> lines, int rank, String prefix) {
        return lines.getOrDefault(rank, List.of()).stream().filter(l -> l.startsWith(prefix)).findFirst()
                .orElseThrow(() -> new AssertionError("rank " + rank + " printed no '" + prefix + "' line; it printed: "
                        + lines.getOrDefault(rank, List.of())));
    }

    /**
     * The victim printed {@code KILLING <ms>} and died of SIGKILL; every other rank printed
     * {@code CAUGHT <ms> <failed rank> <message>} naming it within {@code boundMs}, and exited 0.
     */
    static void assertSurvivorsNamed(LaunchResult result, Map<Integer, List<String>> lines, int n, int victim,
                                     long boundMs) {
        assertEquals(victim, result.failedRank(), result.failure());
        assertTrue(result.failure().contains("killed by signal 9 (SIGKILL)"), result.failure());
        long killedAt = Long.parseLong(find(lines, victim, "KILLING ").split(" ")[1]);
        for (int r = 0; r < n; r++) {
            if (r == victim) {
                continue;
            }
            String caught = find(lines, r, "CAUGHT ");
            String[] parts = caught.split(" ", 4);
            long latency = Long.parseLong(parts[1]) - killedAt;
            System.out.println("rank " + r + " failed " + latency + " ms after rank " + victim + " was killed: " + parts[3]);
            assertEquals(Integer.toString(victim), parts[2], "rank " + r + " names the dead rank: " + caught);
            assertTrue(parts[3].contains("rank " + victim), caught);
            assertTrue(latency < boundMs, "rank " + r + " took " + latency + " ms to notice");
            assertEquals(0, result.exitCode(r), "rank " + r + " exit code");
        }
    }
}
