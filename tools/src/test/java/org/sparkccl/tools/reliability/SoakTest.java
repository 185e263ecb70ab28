package org.sparkccl.tools.reliability;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.sparkccl.tools.launch.LaunchResult;
import org.sparkccl.tools.launch.RankLauncher;
import org.sparkccl.tools.multiprocess.DevShm;

/**
 * 4 ranks (processes, SHM) run a long random sequence of collectives ({@link SoakRank}): every result
 * matches the float64 reference, every rank ends with the same digest of its results, staging and
 * shared memory go back to zero, and open descriptors, threads and mappings do not grow from the
 * first sample to the last. CI: 200 calls sampled every 50; {@code -Psoak}: 10,000 sampled every 1,000.
 */
class SoakTest {
    /**
     * One-off growth that is not a leak: the JVM opens a jar the first time a class of it loads, adds
     * compiler threads on demand, and maps memory for the JIT and malloc arenas. A leak per call, or
     * per few calls, passes these within the run.
     */
    private static final long FD_SLACK = 4;
    private static final long THREAD_SLACK = 4;
    private static final long MAPPING_SLACK = 32;

    @Test
    void twoHundredRandomCollectivesOnFourRanks() {
        soak("host", 4, 200, 50);
    }

    @Test
    @Tag("soak")
    void tenThousandRandomCollectivesOnFourRanks() {
        soak("host", 4, 10_000, 1_000);
    }

    /**
     * Runs {@link SoakRank} in {@code mode} (host or gpu) on {@code n} processes and checks what every
     * SHM and GPU soak must show; returns each rank's output lines for the caller's own checks.
     */
    static Map<Integer, List<String>> soak(String mode, int n, int calls, int sampleEvery) {
        long seed = System.nanoTime();
        Map<Integer, List<String>> lines = new ConcurrentHashMap<>();
        LaunchResult result = RankLauncher.of(n, SoakRank.class.getName())
                .args(mode, Long.toString(seed), Integer.toString(calls), Integer.toString(sampleEvery))
                .jvmOptions("-XX:+UseSerialGC", "-Xmx256m")
                .output(null, System.err)
                .onLine((rank, stderr, line) -> lines.computeIfAbsent(rank, r -> new CopyOnWriteArrayList<>()).add(line))
                .timeout(Duration.ofMinutes(calls > 1000 ? 60 : 3))
                .run();
        assertTrue(result.succeeded(), "seed " + seed + ": " + result.failure() + " " + lines);
        String digest = null;
        for (int r = 0; r < n; r++) {
            List<String> mine = lines.getOrDefault(r, List.of());
            String rankDigest = only(mine, "DIGEST ", r);
            digest = digest == null ? rankDigest : digest;
            assertEquals(digest, rankDigest, "rank " + r + " got other results than rank 0");
            assertEquals("LEFT 0 0", only(mine, "LEFT ", r), "rank " + r + ": staging and shm (host) or device and pinned"
                    + " (gpu) bytes left");
            List<long[]> samples = mine.stream().filter(l -> l.startsWith("SAMPLE ")).map(SoakTest::sample)
                    .collect(Collectors.toList());
            assertEquals(calls / sampleEvery, samples.size(), "rank " + r + " samples");
            long[] first = samples.get(0);
            long[] last = samples.get(samples.size() - 1);
            System.out.println("rank " + r + ": first sample " + render(first) + ", last " + render(last));
            assertTrue(last[1] <= first[1] + FD_SLACK, "rank " + r + ": open file descriptors grew: " + mine.stream()
                    .filter(l -> l.startsWith("SAMPLE ")).reduce((a, b) -> b).orElse(""));
            assertTrue(last[3] <= first[3] + THREAD_SLACK, "rank " + r + ": threads grew from " + first[3] + " to "
                    + last[3]);
            assertTrue(last[2] <= first[2] + MAPPING_SLACK, "rank " + r + ": mappings grew from " + first[2] + " to "
                    + last[2]);
        }
        assertEquals(List.of(), DevShm.leftoversOf(result));
        System.out.println(calls + " random collectives (" + mode + ") on " + n + " ranks: all right, " + digest
                + " on every rank");
        return lines;
    }

    /** {calls, fds, mappings, threads} of a {@code SAMPLE <calls> fds <n> mappings <n> threads <n>} line. */
    private static long[] sample(String line) {
        String[] p = line.split(" ");
        return new long[] {Long.parseLong(p[1]), Long.parseLong(p[3]), Long.parseLong(p[5]), Long.parseLong(p[7])};
    }

    private static String render(long[] s) {
        return "after " + s[0] + " calls: " + s[1] + " fds, " + s[2] + " mappings, " + s[3] + " threads";
    }

    static String only(List<String> lines, String prefix, int rank) {
        return lines.stream().filter(l -> l.startsWith(prefix)).findFirst()
                .orElseThrow(() -> new AssertionError("rank " + rank + " printed no " + prefix + "line: " + lines));
    }
}
