package org.sparkccl.tools.multiprocess;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.sparkccl.core.DataType;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.tools.launch.LaunchResult;
import org.sparkccl.tools.launch.RankLauncher;

/**
 * The one-shot all-reduce across processes ({@link OneShotRank}): every type and op at counts on
 * both sides of the threshold against the reference and bit for bit alike on every rank, thousands
 * of calls that reuse the slots, and ranks on either side of the threshold all failing with both
 * calls named instead of hanging.
 */
class MultiProcessOneShotTest {

    @ParameterizedTest(name = "{0} ranks")
    @ValueSource(ints = {2, 3})
    void oneShotAllReduceAcrossProcesses(int n) {
        RankReports reports = RankReports.run(RankLauncher.of(n, OneShotRank.class.getName())
                .jvmOptions("-XX:+UseSerialGC", "-Xmx128m")
                .output(null, System.err)
                .timeout(Duration.ofMinutes(4)));
        LaunchResult result = reports.result;
        if (!result.succeeded()) {
            fail(result.failure() + " " + reports.allOther());
        }
        int expected = DataType.values().length * ReduceOp.values().length * 5 * 2;
        for (int r = 0; r < n; r++) {
            assertEquals(expected, reports.cases(r).size(), "cases reported by rank " + r);
            for (Map.Entry<String, String> c : reports.cases(0).entrySet()) {
                String line = reports.cases(r).get(c.getKey());
                assertTrue(line.startsWith("wrong=0 "), "rank " + r + ", " + c.getKey() + ": " + line);
                assertEquals(c.getValue(), line, "rank " + r + " differs from rank 0 in " + c.getKey());
            }
            List<String> lines = reports.other(r);
            assertTrue(lines.contains("REUSE " + OneShotRank.REUSE_CALLS + " wrong=0"), "rank " + r + ": " + lines);
            String caught = lines.stream().filter(l -> l.startsWith("CAUGHT ")).findFirst().orElse("none: " + lines);
            String small = "count " + OneShotRank.THRESHOLD / 4 + ",";
            String large = "count " + (OneShotRank.THRESHOLD / 4 + 1) + ",";
            assertTrue(caught.contains(small) && caught.contains(large) && !caught.contains("timed out"),
                    "rank " + r + ": " + caught);
        }
        assertEquals(0, DevShm.leftoversOf(result).size(), "left in /dev/shm: " + DevShm.leftoversOf(result));
    }
}
