package org.sparkccl.ipc.multiprocess;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.sparkccl.ipc.launch.LaunchResult;
import org.sparkccl.ipc.launch.RankLauncher;

/**
 * The socket engines with ranks as processes on 127.0.0.1: one TCP ring (SPARKCCL_SHM_DISABLE=1),
 * and two pretend hosts of two ranks (two-level: /dev/shm inside, TCP across). Every type and op
 * against the reference; a rank SIGKILLed mid-collective named by every survivor within 10 s;
 * nothing left in /dev/shm or in the ranks' memory.
 */
class MultiProcessSocketTest {
    private static final long DETECTION_BOUND_MS = 10_000;

    private static LaunchResult launch(int n, Map<Integer, List<String>> lines, String shmDisable, String... args) {
        return RankLauncher.of(n, SocketRank.class.getName())
                .args(args)
                .env("SPARKCCL_SHM_DISABLE", shmDisable)
                .jvmOptions("-XX:+UseSerialGC", "-Xmx256m")
                .output(null, System.err)
                .onLine((rank, stderr, line) -> lines.computeIfAbsent(rank, r -> new CopyOnWriteArrayList<>()).add(line))
                .survivorGrace(Duration.ofSeconds(60))
                .timeout(Duration.ofMinutes(4))
                .run();
    }

    @ParameterizedTest(name = "{0} ranks on {1} pretend host(s), SHM disabled {2}: {3}")
    @CsvSource({"3, 0, 1, SocketCommunicator", "4, 2, 0, TwoLevelCommunicator"})
    void everyTypeAndOpMatchesTheReference(int n, int hosts, String shmDisable, String engine) {
        Map<Integer, List<String>> lines = new ConcurrentHashMap<>();
        LaunchResult result = launch(n, lines, shmDisable, "matrix", Integer.toString(hosts));
        assertTrue(result.succeeded(), result.failure());
        for (int r = 0; r < n; r++) {
            assertEquals("ENGINE " + engine, RankLines.find(lines, r, "ENGINE "));
            assertEquals("WRONG 0", RankLines.find(lines, r, "WRONG "));
            assertEquals("LEFT 0", RankLines.find(lines, r, "LEFT "));
        }
        assertEquals(List.of(), DevShm.leftoversOf(result));
    }

    @ParameterizedTest(name = "{0} ranks on {1} pretend host(s), SHM disabled {2}, rank {3} killed")
    @CsvSource({"3, 0, 1, 1", "4, 2, 0, 3"})
    void aKilledRankIsNamedByEverySurvivor(int n, int hosts, String shmDisable, int victim) {
        Map<Integer, List<String>> lines = new ConcurrentHashMap<>();
        LaunchResult result = launch(n, lines, shmDisable, "kill", Integer.toString(victim), Integer.toString(hosts));
        RankLines.assertSurvivorsNamed(result, lines, n, victim, DETECTION_BOUND_MS);
        assertEquals(List.of(), DevShm.leftoversOf(result));
    }
}
