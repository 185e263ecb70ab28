package org.sparkccl.tools.reliability;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.sparkccl.tools.launch.LaunchResult;
import org.sparkccl.tools.launch.RankLauncher;
import org.sparkccl.tools.multiprocess.DevShm;

/**
 * SIGKILL of a random rank at a random point (bootstrap, connect, one-shot, LL, Simple, direct):
 * every survivor throws within 10 s naming the dead rank and what it was doing, exits normally,
 * and /dev/shm holds nothing of the job afterwards.
 */
class RandomKillTest {
    /** The bound: survivors fail naming the dead rank within 10 s of its death. */
    private static final long DETECTION_BOUND_MS = 10_000;

    @Test
    void randomKillsAreReportedByEverySurvivor() {
        trials(10, 2, 3);
    }

    @Test
    @Tag("soak")
    void randomKillsAreReportedByEverySurvivorSoak() {
        trials(100, 2, 4);
    }

    private static void trials(int trials, int minRanks, int maxRanks) {
        Random random = new Random(System.nanoTime());
        long worst = 0;
        List<String> summary = new ArrayList<>();
        for (int t = 0; t < trials; t++) {
            int n = minRanks + random.nextInt(maxRanks - minRanks + 1);
            int victim = random.nextInt(n);
            // Every point in turn, so that even the short run covers each of them.
            KillPoint point = KillPoint.values()[t % KillPoint.values().length];
            long seed = random.nextLong();
            worst = Math.max(worst, trial(n, victim, point, seed));
            summary.add(point + "/" + n + "r/victim " + victim);
        }
        System.out.println(trials + " kill trials passed; slowest survivor noticed after " + worst + " ms: " + summary);
    }

    /** One launch; returns the slowest survivor's detection time in ms. */
    private static long trial(int n, int victim, KillPoint point, long seed) {
        String what = point + " with " + n + " ranks, rank " + victim + " killed, seed " + seed;
        Map<Integer, List<String>> lines = new ConcurrentHashMap<>();
        LaunchResult result = RankLauncher.of(n, KillRank.class.getName())
                .args(point.name(), Integer.toString(victim), Long.toString(seed))
                .env("SPARKCCL_ALGO", point.algo)
                .env("SPARKCCL_PROTO", point.proto)
                .jvmOptions("-XX:+UseSerialGC", "-Xmx128m", "-XX:TieredStopAtLevel=1")
                .output(null, System.err)
                .onLine((rank, stderr, line) -> lines.computeIfAbsent(rank, r -> new CopyOnWriteArrayList<>()).add(line))
                .survivorGrace(Duration.ofSeconds(30))
                .timeout(Duration.ofMinutes(2))
                .run();
        assertEquals(victim, result.failedRank(), what + ": " + result.failure());
        assertTrue(result.failure().contains("killed by signal 9 (SIGKILL)"), what + ": " + result.failure());
        long killedAt = Long.parseLong(find(lines, victim, "KILLING ", what).split(" ")[1]);
        long worst = 0;
        boolean everySurvivorFailedInTheBootstrap = true;
        for (int r = 0; r < n; r++) {
            if (r == victim) {
                continue;
            }
            String caught = find(lines, r, "CAUGHT ", what);
            String[] parts = caught.split(" ", 5);
            long latency = Long.parseLong(parts[1]) - killedAt;
            worst = Math.max(worst, latency);
            String message = parts[4];
            everySurvivorFailedInTheBootstrap &= message.contains("TcpBootstrap");
            System.out.println(what + ": rank " + r + " after " + latency + " ms in " + parts[3] + ": " + message);
            assertTrue(message.contains("rank " + victim), what + ": rank " + r + " does not name rank " + victim
                    + ": " + caught);
            assertTrue(namesTheCall(message), what + ": rank " + r + " does not say what it was doing: " + caught);
            assertTrue(latency < DETECTION_BOUND_MS, what + ": rank " + r + " took " + latency + " ms to notice");
            assertEquals(0, result.exitCode(r), what + ": rank " + r + " exit code");
        }
        List<String> left = DevShm.leftoversOf(result);
        if (!left.isEmpty() && everySurvivorFailedInTheBootstrap) {
            // Known gap (docs/reliability.md): a rank killed after creating its segment but before the
            // one exchange that tells its peers its pid leaves the segment; no survivor can know whose it
            // is, and only the stale scan of a later process (after ShmTransport.STALE_AFTER) removes it.
            // It must be the victim's, never a survivor's.
            String victims = "sparkccl-" + result.pid(victim) + "-";
            assertTrue(left.stream().allMatch(name -> name.startsWith(victims)), what + ": left in /dev/shm: " + left);
            System.out.println(what + ": the victim died before the exchange and left " + left + "; removed by the test");
            DevShm.remove(left);
            left = DevShm.leftoversOf(result);
        }
        assertEquals(List.of(), left, what + ": left in /dev/shm");
        return worst;
    }

    /**
     * The message says which call failed: a collective, the bootstrap exchange, or the building of
     * the communicator (e.g. "waited for peers to open this rank's memory in communicator init").
     */
    private static boolean namesTheCall(String message) {
        return message.contains("allReduce") || message.contains("allGather") || message.contains("barrier")
                || message.contains("communicator init");
    }

    private static String find(Map<Integer, List<String>> lines, int rank, String prefix, String what) {
        return lines.getOrDefault(rank, List.of()).stream().filter(l -> l.startsWith(prefix)).findFirst()
                .orElseThrow(() -> new AssertionError(what + ": rank " + rank + " printed no '" + prefix
                        + "' line; it printed: " + lines.getOrDefault(rank, List.of())));
    }
}
