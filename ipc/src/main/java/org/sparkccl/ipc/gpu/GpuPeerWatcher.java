package org.sparkccl.ipc.gpu;

import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.function.IntPredicate;

/**
 * Watches for what a blocking call's wait would notice while stream-ordered calls run and nobody
 * waits for them on the host: a peer process that died, a peer that aborted (its abort record, see
 * {@link GpuAbortRecords}), or the caller's cancel flag (Spark's task kill). Then it raises the host abort word the kernels poll, so that they stop instead of waiting for
 * a peer that will never come, and keeps the reason for the next call on the communicator,
 * {@code synchronize} or {@code checkErrors}. One daemon thread per communicator, started by its first
 * stream-ordered call; it checks every {@link #INTERVAL_MS} ms, as a blocking wait does.
 */
final class GpuPeerWatcher implements AutoCloseable {
    static final long INTERVAL_MS = 50;

    private final int size;
    private final IntPredicate isDead;
    private final BooleanSupplier cancelled;
    private final BooleanSupplier peerAborted;
    private final Runnable raiseAbort;
    private final Thread thread;
    private volatile int deadPeer = -1;
    private volatile boolean cancelSeen;
    private volatile boolean peerAbortSeen;
    private volatile boolean stopped;

    /**
     * {@code isDead(r)}: rank r's process has ended; {@code peerAborted}: some peer's abort record says it
     * failed; {@code raiseAbort} raises this rank's host abort word.
     */
    GpuPeerWatcher(String name, int size, IntPredicate isDead, BooleanSupplier cancelled, BooleanSupplier peerAborted,
                   Runnable raiseAbort) {
        this.size = size;
        this.isDead = isDead;
        this.cancelled = cancelled;
        this.peerAborted = peerAborted;
        this.raiseAbort = raiseAbort;
        this.thread = new Thread(this::watch, name);
        thread.setDaemon(true);
        thread.start();
    }

    /** The rank found dead, or -1. */
    int deadPeer() {
        return deadPeer;
    }

    /** True once the cancel flag was seen raised. */
    boolean cancelSeen() {
        return cancelSeen;
    }

    /** True once a peer's abort record was seen (the communicator reads which peer, and why, from the records). */
    boolean peerAbortSeen() {
        return peerAbortSeen;
    }

    private void watch() {
        while (!stopped && deadPeer < 0 && !cancelSeen && !peerAbortSeen) {
            try {
                TimeUnit.MILLISECONDS.sleep(INTERVAL_MS);
            } catch (InterruptedException e) {
                return; // closing
            }
            for (int r = 0; r < size && deadPeer < 0; r++) {
                if (isDead.test(r)) {
                    deadPeer = r;
                }
            }
            if (deadPeer < 0 && peerAborted.getAsBoolean()) {
                peerAbortSeen = true;
            }
            if (deadPeer < 0 && !peerAbortSeen && cancelled.getAsBoolean()) {
                cancelSeen = true;
            }
            if (deadPeer >= 0 || peerAbortSeen || cancelSeen) {
                raiseAbort.run();
            }
        }
    }

    @Override
    public void close() {
        stopped = true;
        thread.interrupt();
        try {
            thread.join(TimeUnit.SECONDS.toMillis(1));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
