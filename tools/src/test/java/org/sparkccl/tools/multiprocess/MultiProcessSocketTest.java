package org.sparkccl.tools.multiprocess;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
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
 * The socket engines with ranks as processes on 127.0.0.1: one TCP ring (SPARKCCL_SHM_DISABLE=1),
 * and two pretend hosts of two ranks (two-level: /dev/shm inside, TCP across). Every type and op
 * against the reference; a rank SIGKILLed mid-collective named by every survivor within 10 s;
 * nothing left in /dev/shm or in the ranks' memory.
 */
class MultiProcessSocketTest {
    private static final long DETECTION_BOUND_MS = 10_000;

    private static LaunchResult launch(int n, Map<Integer, List<String>> lines, String shmDisable, String... args) {
        return launch(n, lines, shmDisable, List.of(), args);
    }

    private static LaunchResult launch(int n, Map<Integer, List<String>> lines, String shmDisable,
                                       List<String> moreJvmOptions, String... args) {
        List<String> jvm = new ArrayList<>(List.of("-XX:+UseSerialGC", "-Xmx256m"));
        jvm.addAll(moreJvmOptions);
        return RankLauncher.of(n, SocketRank.class.getName())
                .args(args)
                .env("SPARKCCL_SHM_DISABLE", shmDisable)
                .jvmOptions(jvm.toArray(String[]::new))
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

    /**
     * A Java runtime trimmed without the jdk.net module (jlink; simulated with --limit-modules) has no
     * keepalive timings: links still connect, with the system's timings, and each rank (JVM) warns once.
     * The GPU machine's jlinked runtime failed every cross-host link before (ClassNotFoundException).
     */
    @Test
    void aRuntimeWithoutJdkNetStillConnects() {
        Map<Integer, List<String>> lines = new ConcurrentHashMap<>();
        LaunchResult result = launch(2, lines, "1", List.of("--limit-modules", "java.se,jdk.unsupported"), "matrix", "0");
        assertTrue(result.succeeded(), result.failure());
        for (int r = 0; r < 2; r++) {
            assertEquals("WRONG 0", RankLines.find(lines, r, "WRONG "));
            int rank = r;
            assertTrue(lines.get(r).stream().anyMatch(l -> l.contains("has no jdk.net module")),
                    () -> "rank " + rank + " did not warn: " + lines.get(rank));
        }
    }

    @ParameterizedTest(name = "{0} ranks on {1} pretend host(s), SHM disabled {2}, rank {3} killed")
    @CsvSource({"3, 0, 1, 1", "4, 2, 0, 3"})
    void aKilledRankIsNamedByEverySurvivor(int n, int hosts, String shmDisable, int victim) {
        Map<Integer, List<String>> lines = new ConcurrentHashMap<>();
        LaunchResult result = launch(n, lines, shmDisable, "kill", Integer.toString(victim), Integer.toString(hosts));
        RankLines.assertSurvivorsNamed(result, lines, n, victim, DETECTION_BOUND_MS);
        assertEquals(List.of(), DevShm.leftoversOf(result));
    }

    /** Small calls go by recursive doubling over direct connections: a rank killed in one is named as fast. */
    @ParameterizedTest(name = "{0} ranks on {1} pretend host(s), SHM disabled {2}, rank {3} killed in small calls")
    @CsvSource({"2, 0, 1, 0", "3, 0, 1, 2", "4, 0, 1, 1", "4, 2, 0, 2"})
    void aRankKilledInSmallCallsIsNamedByEverySurvivor(int n, int hosts, String shmDisable, int victim) {
        Map<Integer, List<String>> lines = new ConcurrentHashMap<>();
        LaunchResult result = launch(n, lines, shmDisable, "kill-small", Integer.toString(victim), Integer.toString(hosts));
        RankLines.assertSurvivorsNamed(result, lines, n, victim, DETECTION_BOUND_MS);
        assertEquals(List.of(), DevShm.leftoversOf(result));
    }
}
