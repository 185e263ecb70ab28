package org.sparkccl.tools.launch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class RankLauncherTest {
    /** The launcher's promise: a failed launch ends this soon after the first rank fails. */
    private static final Duration FAILURE_BOUND = Duration.ofSeconds(15);

    @Test
    void ranksJoinOneBootstrapWithTheirOwnTmpdirAndInheritedSettings() {
        ByteArrayOutputStream stdout = new ByteArrayOutputStream();
        ByteArrayOutputStream stderr = new ByteArrayOutputStream();
        LaunchResult result = RankLauncher.of(3, LauncherProbe.class.getName())
                .args("gather")
                .env("SPARKCCL_PROTO", "LL")
                .output(new PrintStream(stdout, true, StandardCharsets.UTF_8), new PrintStream(stderr, true, StandardCharsets.UTF_8))
                .timeout(Duration.ofSeconds(120))
                .run()
                .requireSuccess();

        Set<String> tmpdirs = new HashSet<>();
        for (int r = 0; r < 3; r++) {
            String line = result.outputTail(r).stream().filter(l -> l.startsWith("rank ")).findFirst().orElseThrow();
            assertTrue(line.startsWith("rank " + r + " of 3 gathered [0, 1, 2] proto=LL tmpdir="), line);
            tmpdirs.add(line.substring(line.indexOf("tmpdir=")));
            assertEquals(0, result.exitCode(r));
        }
        assertEquals(3, tmpdirs.size(), "each rank has its own java.io.tmpdir: " + tmpdirs);
        String out = stdout.toString(StandardCharsets.UTF_8);
        assertTrue(out.contains("\nrank 0 of 3") || out.startsWith("rank 0 of 3"), "rank 0's stdout is not prefixed:\n" + out);
        assertTrue(out.contains("[rank 1] rank 1 of 3"), out);
        assertTrue(stderr.toString(StandardCharsets.UTF_8).contains("[rank 2] a line on stderr"));
        assertNoOrphans(result);
    }

    @Test
    void aRankThatExitsNonZeroEndsTheLaunchNamingIt() {
        LaunchResult result = assertTimeoutPreemptively(FAILURE_BOUND,
                () -> quiet(RankLauncher.of(3, LauncherProbe.class.getName()).args("exit", "1", "3")).run());
        assertFalse(result.succeeded());
        assertEquals(1, result.failedRank());
        assertTrue(result.failure().startsWith("rank 1 (pid " + result.pid(1) + ") exited with code 3"), result.failure());
        assertEquals(3, result.exitStatus());
        assertTrue(result.outputTail(1).contains("exiting with 3"));
        RankFailedException e = assertThrows(RankFailedException.class, result::requireSuccess);
        assertEquals(result.failure(), e.getMessage());
        assertNoOrphans(result);
    }

    @Test
    void aRankKilledBySigkillIsNamedWithTheSignal() {
        LaunchResult result = assertTimeoutPreemptively(FAILURE_BOUND,
                () -> quiet(RankLauncher.of(2, LauncherProbe.class.getName()).args("sigkill", "0")).run());
        assertEquals(0, result.failedRank());
        assertTrue(result.failure().contains("rank 0 (pid " + result.pid(0) + ") was killed by signal 9 (SIGKILL)"),
                result.failure());
        assertNoOrphans(result);
    }

    @Test
    void ranksThatIgnoreSigtermAreKilled() {
        LaunchResult result = assertTimeoutPreemptively(FAILURE_BOUND,
                () -> quiet(RankLauncher.of(3, LauncherProbe.class.getName()).args("stubborn", "2")
                        .terminateGrace(Duration.ofSeconds(2))).run());
        assertEquals(2, result.failedRank());
        assertTrue(result.failure().contains("exited with code 3"), result.failure());
        // Ranks 0 and 1 hung in their shutdown hook after SIGTERM, so SIGKILL ended them.
        assertEquals(128 + 9, result.exitCode(0));
        assertEquals(128 + 9, result.exitCode(1));
        assertNoOrphans(result);
    }

    @Test
    void aLaunchThatOutlivesItsTimeoutIsStopped() {
        LaunchResult result = quiet(RankLauncher.of(2, LauncherProbe.class.getName()).args("exit", "5", "1")
                .timeout(Duration.ofSeconds(3))).run();
        assertFalse(result.succeeded());
        assertEquals(-1, result.failedRank());
        assertTrue(result.failure().contains("timed out after 3 s with ranks [0, 1] still running"), result.failure());
        assertNotEquals(0, result.exitStatus());
        assertNoOrphans(result);
    }

    /**
     * The launcher's own end, as when a user stops bin/allreduce-perf: SIGTERM runs its shutdown hook,
     * which kills the ranks; after SIGKILL the ranks see that their launcher is gone and exit.
     */
    @ParameterizedTest(name = "launcher ended by SIGKILL: {0}")
    @ValueSource(booleans = {false, true})
    void ranksDoNotOutliveTheirLauncher(boolean sigkill) throws Exception {
        Process launcher = new ProcessBuilder(Paths.get(System.getProperty("java.home"), "bin", "java").toString(),
                "-cp", System.getProperty("java.class.path"), LauncherProbe.class.getName(), "launch", "2")
                .redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
        try {
            List<ProcessHandle> ranks = List.of();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (ranks.size() < 2 && System.nanoTime() < deadline) {
                Thread.sleep(100);
                ranks = launcher.descendants().collect(Collectors.toList());
            }
            assertEquals(2, ranks.size(), "the launcher started its ranks");
            if (sigkill) {
                launcher.destroyForcibly();
            } else {
                launcher.destroy();
            }
            assertTrue(launcher.waitFor(20, TimeUnit.SECONDS));
            for (ProcessHandle rank : ranks) {
                try {
                    rank.onExit().get(20, TimeUnit.SECONDS);
                } catch (TimeoutException e) {
                    rank.destroyForcibly();
                    throw new AssertionError("rank pid " + rank.pid() + " outlived its launcher");
                }
            }
        } finally {
            launcher.descendants().forEach(ProcessHandle::destroyForcibly);
            launcher.destroyForcibly();
        }
    }

    private static RankLauncher quiet(RankLauncher launcher) {
        return launcher.output(null, null);
    }

    private static void assertNoOrphans(LaunchResult result) {
        for (int r = 0; r < result.size(); r++) {
            long pid = result.pid(r);
            boolean alive = ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false);
            assertFalse(alive, "rank " + r + " (pid " + pid + ") outlived the launch");
        }
        List<ProcessHandle> children = ProcessHandle.current().children().filter(ProcessHandle::isAlive).toList();
        for (ProcessHandle c : children) {
            for (int r = 0; r < result.size(); r++) {
                assertNotEquals(result.pid(r), c.pid(), "rank " + r + " is still a live child of this JVM");
            }
        }
    }
}
