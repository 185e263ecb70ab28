package org.sparkccl.tools.multiprocess;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.sparkccl.tools.launch.LaunchResult;
import org.sparkccl.tools.launch.RankLauncher;

/**
 * The whole collective matrix of {@link CollectiveMatrixRank} (every type, op, protocol and collective)
 * with 4 rank processes on rings forced out of rank order, a different one on each of 2 channels:
 * every result matches the reference and is the same on every rank.
 */
class MultiProcessForcedRingsTest {
    private static final int RANKS = 4;

    @Test
    void everyCollectiveMatchesTheReferenceOnForcedRings() {
        RankReports reports = RankReports.run(RankLauncher.of(RANKS, CollectiveMatrixRank.class.getName())
                .args("small")
                .env("SPARKCCL_RINGS", "3 1 0 2|0 2 3 1")
                .env("SPARKCCL_NCHANNELS", "2")
                .env("SPARKCCL_ALGO", "Ring")
                .jvmOptions("-XX:+UseSerialGC", "-Xmx256m")
                .output(null, System.err)
                .timeout(Duration.ofMinutes(8)));
        LaunchResult result = reports.result;
        if (!result.succeeded()) {
            fail(result.failure() + "\n" + String.join("\n", result.outputTail(0)));
        }
        reports.assertEveryCaseRightAndAlike(RANKS, CollectiveMatrixRank.PROTOCOLS.size()
                * CollectiveMatrixRank.casesPerProtocol(false));
        assertEquals(0, DevShm.leftoversOf(result).size(), "left in /dev/shm: " + DevShm.leftoversOf(result));
    }
}
