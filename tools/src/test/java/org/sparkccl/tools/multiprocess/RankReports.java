package org.sparkccl.tools.multiprocess;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import org.sparkccl.tools.launch.LaunchResult;
import org.sparkccl.tools.launch.RankLauncher;

/**
 * What launched test ranks print on stdout, per rank: {@code CASE <name> <result>} lines as a map
 * from case name to result, every other line in order. Runs the launcher it is given.
 */
final class RankReports {
    private final Map<Integer, Map<String, String>> cases = new ConcurrentHashMap<>();
    private final Map<Integer, List<String>> other = new ConcurrentHashMap<>();
    final LaunchResult result;

    private RankReports(RankLauncher launcher) {
        this.result = launcher.onLine(this::record).run();
    }

    /** Runs {@code launcher} (output, options and timeout already set) and collects its ranks' reports. */
    static RankReports run(RankLauncher launcher) {
        return new RankReports(launcher);
    }

    private void record(int rank, boolean stderr, String line) {
        if (stderr) {
            return;
        }
        if (line.startsWith("CASE ")) {
            String[] parts = line.split(" ", 3);
            cases.computeIfAbsent(rank, r -> new ConcurrentHashMap<>()).put(parts[1], parts[2]);
        } else {
            other.computeIfAbsent(rank, r -> new CopyOnWriteArrayList<>()).add(line);
        }
    }

    /** Rank {@code r}'s cases: name -> result line (empty if it reported none). */
    Map<String, String> cases(int r) {
        return cases.getOrDefault(r, Map.of());
    }

    /** Rank {@code r}'s other stdout lines. */
    List<String> other(int r) {
        return other.getOrDefault(r, List.of());
    }

    /** Every rank's other lines, for failure messages. */
    Map<Integer, List<String>> allOther() {
        return other;
    }

    /**
     * Every one of {@code ranks} ranks reported {@code expected} cases, each with no wrong element and,
     * where it has a crc (not {@code -}), the same result line as rank 0's.
     */
    void assertEveryCaseRightAndAlike(int ranks, int expected) {
        for (int r = 0; r < ranks; r++) {
            assertEquals(expected, cases(r).size(), "cases reported by rank " + r);
        }
        for (Map.Entry<String, String> c : new TreeMap<>(cases(0)).entrySet()) {
            for (int r = 0; r < ranks; r++) {
                String line = cases(r).get(c.getKey());
                assertTrue(line.startsWith("wrong=0 "), "rank " + r + ", " + c.getKey() + ": " + line);
                String crc = line.substring(line.indexOf("crc=") + 4);
                if (!crc.equals("-")) {
                    assertEquals(c.getValue(), line, "rank " + r + " differs from rank 0 in " + c.getKey());
                }
            }
        }
    }
}
