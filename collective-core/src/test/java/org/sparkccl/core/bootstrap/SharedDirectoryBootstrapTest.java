package org.sparkccl.core.bootstrap;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.BooleanSupplier;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.sparkccl.core.CclException;
import org.sparkccl.core.CclTimeoutException;

/** Ranks as threads of this JVM, meeting in a temporary directory. */
@Timeout(60)
class SharedDirectoryBootstrapTest {
    private static final long TIMEOUT_MS = 20_000;

    @TempDir
    Path root;

    private final ExecutorService pool = Executors.newCachedThreadPool();

    @AfterEach
    void stopThreads() throws InterruptedException {
        pool.shutdownNow();
        assertTrue(pool.awaitTermination(10, TimeUnit.SECONDS), "rank threads still running");
    }

    interface RankBody {
        Object run(SharedDirectoryBootstrap b) throws Exception;
    }

    @ParameterizedTest
    @ValueSource(ints = {1, 2, 5})
    void everyRoundReturnsEveryRanksBytesAndLeavesNoFiles(int n) throws Exception {
        runGroup(n, "app-1-stage3-attempt0", () -> false, b -> {
            for (int round = 0; round < 6; round++) {
                byte[][] all = b.allGather(payload(b.rank(), round));
                assertEquals(n, all.length);
                for (int r = 0; r < n; r++) {
                    assertArrayEquals(payload(r, round), all[r], "rank " + b.rank() + " round " + round + " part " + r);
                }
                b.barrier();
            }
            return null;
        });
        assertRootEmpty();
    }

    @Test
    void emptyAndLargeMessagesKeepTheirSizes() throws Exception {
        runGroup(3, "sizes", () -> false, b -> {
            byte[] mine = b.rank() == 0 ? new byte[0] : payloadOfSize(b.rank(), b.rank() == 1 ? 1 : 3 << 20);
            byte[][] all = b.allGather(mine);
            assertEquals(0, all[0].length);
            assertArrayEquals(payloadOfSize(1, 1), all[1]);
            assertArrayEquals(payloadOfSize(2, 3 << 20), all[2]);
            return null;
        });
        assertRootEmpty();
    }

    @Test
    void timeoutNamesTheMissingRanksTheDirectoryAndTheSetting() throws Exception {
        // Ranks 0 and 2 of 4 come; 1 and 3 never do.
        List<Future<Object>> futures = new ArrayList<>();
        for (int r : new int[] {0, 2}) {
            futures.add(pool.submit(() -> {
                try (SharedDirectoryBootstrap b = SharedDirectoryBootstrap.open(root, "late", r, 4, 300, () -> false)) {
                    return b.allGather(new byte[] {1});
                }
            }));
        }
        for (Future<Object> f : futures) {
            ExecutionException e = assertThrows(ExecutionException.class, () -> f.get(20, TimeUnit.SECONDS));
            assertTrue(e.getCause() instanceof CclTimeoutException, String.valueOf(e.getCause()));
            String message = e.getCause().getMessage();
            assertTrue(message.contains("ranks [1, 3]"), message);
            assertTrue(message.contains(root.resolve("sparkccl-bootstrap-late").toString()), message);
            assertTrue(message.contains("SPARKCCL_TIMEOUT_MS"), message);
        }
    }

    @Test
    void cancellationEndsTheWait() throws Exception {
        AtomicBoolean cancelled = new AtomicBoolean();
        Future<Object> waiting = pool.submit(() -> {
            try (SharedDirectoryBootstrap b = SharedDirectoryBootstrap.open(root, "cancel", 0, 2, TIMEOUT_MS,
                    cancelled::get)) {
                return b.allGather(new byte[] {1});
            }
        });
        Thread.sleep(100);
        cancelled.set(true);
        ExecutionException e = assertThrows(ExecutionException.class, () -> waiting.get(20, TimeUnit.SECONDS));
        assertTrue(e.getCause() instanceof CclException, String.valueOf(e.getCause()));
        assertTrue(e.getCause().getMessage().contains("cancelled"), e.getCause().getMessage());
        assertTrue(e.getCause().getMessage().contains("ranks [1]"), e.getCause().getMessage());
    }

    @Test
    void interruptionEndsTheWait() throws Exception {
        Future<Object> waiting = pool.submit(() -> {
            try (SharedDirectoryBootstrap b = SharedDirectoryBootstrap.open(root, "interrupt", 1, 2, TIMEOUT_MS,
                    () -> false)) {
                return b.allGather(new byte[] {1});
            }
        });
        Thread.sleep(100);
        waiting.cancel(true);
        pool.shutdown();
        assertTrue(pool.awaitTermination(10, TimeUnit.SECONDS), "the waiting rank did not stop when interrupted");
    }

    @Test
    void differentCallsFailNamingBoth() throws Exception {
        List<Throwable> errors = runGroupExpectingFailures(2, "differ", b -> {
            if (b.rank() == 0) {
                b.barrier();
            } else {
                b.allGather(new byte[] {7});
            }
            return null;
        });
        for (Throwable t : errors) {
            assertTrue(t.getMessage().contains("differ across ranks"), t.getMessage());
            assertTrue(t.getMessage().contains("barrier #1") && t.getMessage().contains("allGather #1"),
                    t.getMessage());
        }
    }

    @Test
    void twoGroupsWithDifferentKeysDoNotMix() throws Exception {
        Future<Object> stage1 = pool.submit(() -> {
            runGroup(3, "app-stage1-attempt0", () -> false, b -> checkRounds(b, 1));
            return null;
        });
        Future<Object> stage2 = pool.submit(() -> {
            runGroup(3, "app-stage2-attempt0", () -> false, b -> checkRounds(b, 2));
            return null;
        });
        stage1.get(30, TimeUnit.SECONDS);
        stage2.get(30, TimeUnit.SECONDS);
        assertRootEmpty();
    }

    @Test
    void aLeftoverDirectoryOfAnEarlierAttemptIsNotRead() throws Exception {
        // An attempt whose rank died left its round file behind: the next attempt meets elsewhere.
        Path stale = Files.createDirectories(root.resolve("sparkccl-bootstrap-app-stage4-attempt0"));
        Files.write(stale.resolve("round0-rank1"), new byte[] {1, 2, 3});
        runGroup(2, "app-stage4-attempt1", () -> false, b -> checkRounds(b, 4));
        assertTrue(Files.exists(stale.resolve("round0-rank1")));
        assertFalse(Files.exists(root.resolve("sparkccl-bootstrap-app-stage4-attempt1")));
    }

    @Test
    void refusesKeysThatAreNotAFileName() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> SharedDirectoryBootstrap.open(root, "../escape", 0, 1, TIMEOUT_MS, () -> false));
        assertTrue(e.getMessage().contains("../escape"), e.getMessage());
    }

    @Test
    void defaultRootIsSharedMemoryWhereTheMachineHasIt() {
        Path expected = Files.isDirectory(Path.of("/dev/shm")) && Files.isWritable(Path.of("/dev/shm"))
                ? Path.of("/dev/shm") : Path.of(System.getProperty("java.io.tmpdir"));
        assertEquals(expected, SharedDirectoryBootstrap.defaultRoot());
    }

    /** Three rounds whose bytes carry the group's tag: bytes of another group would show. */
    private static Object checkRounds(SharedDirectoryBootstrap b, int tag) {
        for (int round = 0; round < 3; round++) {
            byte[][] all = b.allGather(new byte[] {(byte) tag, (byte) b.rank(), (byte) round});
            for (int r = 0; r < all.length; r++) {
                assertArrayEquals(new byte[] {(byte) tag, (byte) r, (byte) round}, all[r]);
            }
        }
        return null;
    }

    @Test
    void aLeftoverWhoseOwnerIsDeadIsSweptByTheNextGroupsRankZero() throws Exception {
        Process gone = new ProcessBuilder("true").start();
        gone.waitFor();
        Path leftover = leftover("app-killed-stage1-attempt0", gone.pid(), 0);
        runGroup(2, "next", () -> false, b -> null);
        assertFalse(Files.exists(leftover), leftover + " should have been swept: its owner is dead");
        assertRootEmpty();
    }

    @Test
    void aLeftoverWhosePidWasReusedIsSwept() throws Exception {
        // This JVM's pid, but a start time long before it: another process that had this pid once.
        Path leftover = leftover("app-reused-stage1-attempt0", ProcessHandle.current().pid(), 1);
        runGroup(1, "next", () -> false, b -> null);
        assertFalse(Files.exists(leftover), leftover + " should have been swept: its pid belongs to another process now");
    }

    @Test
    void aDirectoryWithALiveOwnerIsKept() throws Exception {
        long start = ProcessHandle.current().info().startInstant().orElseThrow().toEpochMilli();
        Path live = leftover("app-live-stage1-attempt0", ProcessHandle.current().pid(), start);
        runGroup(1, "next", () -> false, b -> null);
        assertTrue(Files.isDirectory(live), live + " has a live owner and must be kept");
    }

    @Test
    void aRecentDirectoryAnOwnerInAnotherPidNamespaceAndForeignFilesAreKept() throws Exception {
        Process gone = new ProcessBuilder("true").start();
        gone.waitFor();
        Path recent = root.resolve(SharedDirectoryBootstrap.DIRECTORY_PREFIX + "recent");
        Files.createDirectory(recent);
        BootstrapDirectorySweep.record(recent, gone.pid(), 0, myNamespace());
        Path otherNamespace = leftover("other-namespace", gone.pid(), 0, myNamespace() + 1);
        Path foreign = leftover("foreign", gone.pid(), 0);
        Files.createFile(foreign.resolve("not-ours"));
        makeOld(foreign);
        runGroup(1, "next", () -> false, b -> null);
        assertTrue(Files.isDirectory(recent), "younger than the grace period: kept");
        assertTrue(Files.isDirectory(otherNamespace), "an owner in another pid namespace may be alive: kept");
        assertTrue(Files.isDirectory(foreign), "holds a file the bootstrap does not write: kept");
    }

    @Test
    void aDirectoryInUseIsKeptEvenWhenOld() throws Exception {
        // Rank 1 of "busy" joins and waits; its directory is made to look old; another group's rank 0 sweeps.
        Future<Object> waiting = pool.submit(() -> {
            try (SharedDirectoryBootstrap b = SharedDirectoryBootstrap.open(root, "busy", 1, 2, TIMEOUT_MS, () -> false)) {
                return b.allGather(payload(1, 0))[0];
            }
        });
        Path busy = root.resolve(SharedDirectoryBootstrap.DIRECTORY_PREFIX + "busy");
        while (!Files.exists(busy.resolve("round0-rank1"))) {
            Thread.sleep(5);
        }
        makeOld(busy);
        runGroup(1, "sweeper", () -> false, b -> null);
        assertTrue(Files.isDirectory(busy), "a live rank's directory must be kept");
        try (SharedDirectoryBootstrap b = SharedDirectoryBootstrap.open(root, "busy", 0, 2, TIMEOUT_MS, () -> false)) {
            assertArrayEquals(payload(1, 0), b.allGather(payload(0, 0))[1]);
        }
        assertArrayEquals(payload(0, 0), (byte[]) waiting.get(30, TimeUnit.SECONDS));
        assertRootEmpty();
    }

    /** A rendezvous directory of a group that never closed, owned by {@code pid}, untouched for an hour. */
    private Path leftover(String key, long pid, long startMillis) throws Exception {
        return leftover(key, pid, startMillis, myNamespace());
    }

    private Path leftover(String key, long pid, long startMillis, long namespace) throws Exception {
        Path dir = root.resolve(SharedDirectoryBootstrap.DIRECTORY_PREFIX + key);
        Files.createDirectory(dir);
        BootstrapDirectorySweep.record(dir, pid, startMillis, namespace);
        Files.write(dir.resolve("round0-rank0"), new byte[8]);
        makeOld(dir);
        return dir;
    }

    private static void makeOld(Path dir) throws Exception {
        Files.setLastModifiedTime(dir, FileTime.from(Instant.now().minus(BootstrapDirectorySweep.GRACE).minusSeconds(3600)));
    }

    private static long myNamespace() {
        return BootstrapDirectorySweep.pidNamespace(Path.of("/proc/self/ns/pid"));
    }

    private List<Object> runGroup(int n, String key, BooleanSupplier cancelled, RankBody body) throws Exception {
        ExecutorService ranks = Executors.newFixedThreadPool(n);
        try {
            List<Future<Object>> futures = new ArrayList<>();
            for (int r = 0; r < n; r++) {
                int rank = r;
                futures.add(ranks.submit(() -> {
                    try (SharedDirectoryBootstrap b = SharedDirectoryBootstrap.open(root, key, rank, n, TIMEOUT_MS,
                            cancelled)) {
                        return body.run(b);
                    }
                }));
            }
            List<Object> out = new ArrayList<>();
            for (Future<Object> f : futures) {
                out.add(f.get(30, TimeUnit.SECONDS));
            }
            return out;
        } finally {
            ranks.shutdownNow();
        }
    }

    private List<Throwable> runGroupExpectingFailures(int n, String key, RankBody body) throws Exception {
        List<Future<Object>> futures = new ArrayList<>();
        for (int r = 0; r < n; r++) {
            int rank = r;
            futures.add(pool.submit(() -> {
                try (SharedDirectoryBootstrap b = SharedDirectoryBootstrap.open(root, key, rank, n, TIMEOUT_MS,
                        () -> false)) {
                    return body.run(b);
                }
            }));
        }
        List<Throwable> errors = new ArrayList<>();
        for (Future<Object> f : futures) {
            errors.add(assertThrows(ExecutionException.class, () -> f.get(30, TimeUnit.SECONDS)).getCause());
        }
        return errors;
    }

    private void assertRootEmpty() throws Exception {
        try (Stream<Path> left = Files.list(root)) {
            Object[] files = left.toArray();
            assertEquals(0, files.length, "left behind: " + Arrays.toString(files));
        }
    }

    private static byte[] payload(int rank, int round) {
        return payloadOfSize(rank * 31 + round, 1 + (rank * 7 + round * 13) % 50);
    }

    private static byte[] payloadOfSize(int seed, int length) {
        byte[] b = new byte[length];
        for (int i = 0; i < length; i++) {
            b[i] = (byte) (seed * 131 + i * 7);
        }
        return b;
    }
}
