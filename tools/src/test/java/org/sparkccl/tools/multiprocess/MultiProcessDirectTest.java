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
 * The direct all-reduce on shared buffers across processes ({@link DirectRank}): every type and op
 * against the reference and bit for bit the rank-order fold on every rank, 4 Mi + 3 elements,
 * shared buffers on some ranks only failing on every rank instead of hanging, and nothing left in
 * /dev/shm or mapped afterwards.
 */
class MultiProcessDirectTest {

    @ParameterizedTest(name = "{0} ranks")
    @ValueSource(ints = {2, 3})
    void directAllReduceAcrossProcesses(int n) {
        RankReports reports = RankReports.run(RankLauncher.of(n, DirectRank.class.getName())
                .jvmOptions("-XX:+UseSerialGC", "-Xmx128m")
                .output(null, System.err)
                .timeout(Duration.ofMinutes(4)));
        LaunchResult result = reports.result;
        if (!result.succeeded()) {
            fail(result.failure() + " " + reports.allOther());
        }
        int expected = DataType.values().length * ReduceOp.values().length * DirectRank.COUNTS.length * 2 + 1;
        for (int r = 0; r < n; r++) {
            assertEquals(expected, reports.cases(r).size(), "cases reported by rank " + r);
            for (Map.Entry<String, String> c : reports.cases(0).entrySet()) {
                String line = reports.cases(r).get(c.getKey());
                assertTrue(line.startsWith("wrong=0 fold=same "), "rank " + r + ", " + c.getKey() + ": " + line);
                assertEquals(c.getValue(), line, "rank " + r + " differs from rank 0 in " + c.getKey());
            }
            List<String> lines = reports.other(r);
            String caught = lines.stream().filter(l -> l.startsWith("CAUGHT ")).findFirst().orElse("none: " + lines);
            assertTrue(caught.contains("count 100000") && !caught.contains("timed out"), "rank " + r + ": " + caught);
            assertTrue(lines.contains("MAPPED 0"), "rank " + r + " still maps /dev/shm: " + lines);
        }
        assertEquals(0, DevShm.leftoversOf(result).size(), "left in /dev/shm: " + DevShm.leftoversOf(result));
    }
}
