package org.sparkccl.ipc.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.sparkccl.core.CclException;
import org.sparkccl.core.CclTimeoutException;

/** The host-side rendezvous of ranks that share a GPU in one process (no GPU needed: it is plain Java). */
class SharedGpuLaunchGateTest {
    private static final long TEN_SECONDS = TimeUnit.SECONDS.toNanos(10);
    /** Threads of their own for the waiting ranks (the common pool may have only one on 2 cores). */
    private final ExecutorService ranks = Executors.newFixedThreadPool(2);

    @AfterEach
    void stopRanks() {
        ranks.shutdownNow();
    }

    @Test
    void noRankPassesUntilAllHaveArrivedForTheSameCall() throws Exception {
        String id = "test-" + System.nanoTime();
        try (SharedGpuLaunchGate a = new SharedGpuLaunchGate(id, 0, 3);
             SharedGpuLaunchGate b = new SharedGpuLaunchGate(id, 0, 3);
             SharedGpuLaunchGate c = new SharedGpuLaunchGate(id, 0, 3)) {
            for (int call = 0; call < 50; call++) {
                AtomicInteger passed = new AtomicInteger();
                CompletableFuture<Void> first = CompletableFuture.runAsync(() -> {
                    a.awaitPeers(() -> false, TEN_SECONDS, "rank 0");
                    passed.incrementAndGet();
                }, ranks);
                CompletableFuture<Void> second = CompletableFuture.runAsync(() -> {
                    b.awaitPeers(() -> false, TEN_SECONDS, "rank 1");
                    passed.incrementAndGet();
                }, ranks);
                Thread.sleep(call == 0 ? 100 : 1);
                assertEquals(0, passed.get(), "call " + call + ": a rank passed before the third arrived");
                c.awaitPeers(() -> false, TEN_SECONDS, "rank 2");
                CompletableFuture.allOf(first, second).get(10, TimeUnit.SECONDS);
                assertEquals(2, passed.get());
            }
        }
    }

    @Test
    void aCancelledRankStopsWaitingAndReleasesItsPeers() throws Exception {
        String id = "test-" + System.nanoTime();
        AtomicBoolean killed = new AtomicBoolean();
        try (SharedGpuLaunchGate a = new SharedGpuLaunchGate(id, 1, 2);
             SharedGpuLaunchGate b = new SharedGpuLaunchGate(id, 1, 2)) {
            CompletableFuture<CclException> waiting = CompletableFuture.supplyAsync(() -> assertThrows(CclException.class,
                    () -> a.awaitPeers(killed::get, TEN_SECONDS, "rank 0: allReduce #1")), ranks);
            Thread.sleep(50);
            killed.set(true);
            CclException e = waiting.get(10, TimeUnit.SECONDS);
            assertTrue(e.getMessage().contains("rank 0: allReduce #1 cancelled (task killed)"), e.getMessage());
            // The gate is over: the late peer goes on at once (its kernel then meets rank 0's abort).
            long start = System.nanoTime();
            b.awaitPeers(() -> false, TEN_SECONDS, "rank 1");
            assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(1));
        }
    }

    @Test
    void aPeerThatNeverComesTimesOutWithAClearMessage() {
        String id = "test-" + System.nanoTime();
        try (SharedGpuLaunchGate a = new SharedGpuLaunchGate(id, 2, 2);
             SharedGpuLaunchGate b = new SharedGpuLaunchGate(id, 2, 2)) {
            CclTimeoutException e = assertThrows(CclTimeoutException.class,
                    () -> a.awaitPeers(() -> false, TimeUnit.MILLISECONDS.toNanos(100), "rank 0: broadcast #3"));
            assertTrue(e.getMessage().contains("rank 0: broadcast #3 timed out after 100 ms waiting for the other 1"
                    + " rank(s) of this process that share its GPU"), e.getMessage());
        }
    }

    @Test
    void closingOneRankEndsTheGateForTheOthers() throws Exception {
        String id = "test-" + System.nanoTime();
        SharedGpuLaunchGate a = new SharedGpuLaunchGate(id, 3, 2);
        try (SharedGpuLaunchGate b = new SharedGpuLaunchGate(id, 3, 2)) {
            CompletableFuture<Void> waiting = CompletableFuture.runAsync(
                    () -> b.awaitPeers(() -> false, TEN_SECONDS, "rank 1"), ranks);
            Thread.sleep(50);
            a.close();
            waiting.get(10, TimeUnit.SECONDS);
        }
    }
}
