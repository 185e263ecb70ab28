package org.sparkccl.ipc.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** The watcher behind stream-ordered calls, without a GPU: what it finds, and that it raises the abort once. */
class GpuPeerWatcherTest {
    @Test
    void aDeadPeerRaisesTheAbortAndIsNamed() throws Exception {
        AtomicInteger dead = new AtomicInteger(-1);
        AtomicInteger raised = new AtomicInteger();
        CountDownLatch abort = new CountDownLatch(1);
        try (GpuPeerWatcher watcher = new GpuPeerWatcher("test-watch", 3, r -> r == dead.get(), () -> false, () -> false, () -> {
            raised.incrementAndGet();
            abort.countDown();
        })) {
            Thread.sleep(3 * GpuPeerWatcher.INTERVAL_MS);
            assertEquals(0, raised.get(), "nobody died yet");
            assertEquals(-1, watcher.deadPeer());
            dead.set(2);
            assertTrue(abort.await(5, TimeUnit.SECONDS), "the abort was not raised");
            assertEquals(2, watcher.deadPeer());
            assertFalse(watcher.cancelSeen());
            Thread.sleep(3 * GpuPeerWatcher.INTERVAL_MS);
            assertEquals(1, raised.get(), "raised once, then the watcher stops");
        }
    }

    @Test
    void aCancelledTaskRaisesTheAbort() throws Exception {
        AtomicBoolean cancelled = new AtomicBoolean();
        CountDownLatch abort = new CountDownLatch(1);
        try (GpuPeerWatcher watcher = new GpuPeerWatcher("test-watch", 2, r -> false, cancelled::get, () -> false,
                abort::countDown)) {
            cancelled.set(true);
            assertTrue(abort.await(5, TimeUnit.SECONDS), "the abort was not raised");
            assertTrue(watcher.cancelSeen());
            assertEquals(-1, watcher.deadPeer());
        }
    }

    @Test
    void aPeersAbortRecordRaisesTheAbortBeforeTheCancel() throws Exception {
        AtomicBoolean aborted = new AtomicBoolean();
        AtomicBoolean cancelled = new AtomicBoolean();
        CountDownLatch abort = new CountDownLatch(1);
        try (GpuPeerWatcher watcher = new GpuPeerWatcher("test-watch", 2, r -> false, cancelled::get, aborted::get,
                abort::countDown)) {
            Thread.sleep(3 * GpuPeerWatcher.INTERVAL_MS);
            assertEquals(1, abort.getCount(), "no peer aborted yet");
            // Spark kills the rest of a stage after one task failed: the peer's failure is the cause.
            cancelled.set(true);
            aborted.set(true);
            assertTrue(abort.await(5, TimeUnit.SECONDS), "the abort was not raised");
            assertTrue(watcher.peerAbortSeen() || watcher.cancelSeen());
            assertEquals(-1, watcher.deadPeer());
        }
    }

    @Test
    void closeEndsTheThread() {
        GpuPeerWatcher watcher = new GpuPeerWatcher("test-watch-close", 2, r -> false, () -> false, () -> false,
                () -> { });
        watcher.close();
        assertFalse(Thread.getAllStackTraces().keySet().stream()
                .anyMatch(t -> t.getName().equals("test-watch-close") && t.isAlive()), "the watcher thread lives on");
    }
}
