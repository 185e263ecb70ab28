package org.sparkccl.ipc.gpu;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;
import org.sparkccl.core.CclException;
import org.sparkccl.core.CclTimeoutException;

/**
 * Ranks of one process that share one GPU launch each collective together. Their kernels run in the
 * same CUDA context, and a persistent kernel waits for its peers. While it waits, another thread of
 * that context that allocates or frees CUDA memory ({@code cuMemFree}, {@code cuMemHostAlloc}, ...)
 * waits for the GPU, and so for that kernel. If that thread is the peer the kernel waits for, both
 * stop until the collective times out. TrainJob's resume did exactly this: rank 1 waited in a
 * broadcast while rank 0 read the checkpoint and allocated pinned memory.
 *
 * <p>So before launching, each such rank waits on the host until all of them have entered the same
 * collective: none of them is then outside it while a kernel waits. Ranks on other GPUs or in other
 * processes have contexts of their own and do not take part. A failed or closed rank ends the gate
 * for all (they then launch at once and learn of the failure from their kernels).
 *
 * <p>Blocking calls only: a stream-ordered call returns before its kernel runs, so there is nothing to
 * hold; what those calls rely on instead is in docs/architecture.md (stream-ordered calls).
 */
final class SharedGpuLaunchGate implements AutoCloseable {
    private static final Map<String, Barrier> GATES = new ConcurrentHashMap<>();
    /** How often a rank waiting at the gate checks for cancellation and its deadline. */
    private static final long CHECK_EVERY_NS = TimeUnit.MILLISECONDS.toNanos(20);
    /**
     * Waiting ranks spin this long, then yield, then park briefly. A parked thread's wake-up costs tens of
     * microseconds, which the gate's Phaser (it parked after a few hundred spins) added to every call of 2
     * ranks as threads on one GPU: the calls spend a few microseconds in all, and the ranks arrive within
     * a few microseconds of each other.
     */
    private static final long SPIN_NS = TimeUnit.MICROSECONDS.toNanos(200);
    private static final long YIELD_NS = TimeUnit.MILLISECONDS.toNanos(20);
    private static final long PARK_NS = TimeUnit.MICROSECONDS.toNanos(50);

    private final String key;
    private final Barrier barrier;
    private final int parties;

    /** The gate of the {@code parties} ranks that share a GPU in this process, in communicator {@code id}. */
    SharedGpuLaunchGate(String id, int device, int parties) {
        this.key = id + "/gpu" + device;
        this.parties = parties;
        this.barrier = GATES.computeIfAbsent(key, k -> new Barrier(parties));
    }

    /**
     * Returns when every rank of the gate has called this for the same collective, or the gate has
     * ended; throws when {@code cancelled} turns true or {@code timeoutNs} passes first.
     */
    void awaitPeers(BooleanSupplier cancelled, long timeoutNs, String what) {
        awaitPeers(cancelled, timeoutNs, () -> what);
    }

    /** The same, with the call's description made only if it fails (a string per call costs more than the gate). */
    void awaitPeers(BooleanSupplier cancelled, long timeoutNs, Supplier<String> what) {
        long generation = barrier.arrive();
        if (generation < 0) {
            return; // the last to arrive, or the gate has ended
        }
        long start = System.nanoTime();
        long nextCheck = start + CHECK_EVERY_NS;
        int spins = 0;
        while (barrier.waiting(generation)) {
            if ((++spins & 63) != 0) {
                Thread.onSpinWait();
                continue;
            }
            long now = System.nanoTime();
            long waited = now - start;
            if (waited > YIELD_NS) {
                LockSupport.parkNanos(PARK_NS);
            } else if (waited > SPIN_NS) {
                Thread.yield();
            }
            if (now - nextCheck < 0) {
                continue;
            }
            nextCheck = now + CHECK_EVERY_NS;
            if (Thread.interrupted()) {
                Thread.currentThread().interrupt();
                barrier.terminate();
                throw new CclException(what.get() + " interrupted while waiting for the ranks of this process that share its GPU");
            }
            if (cancelled.getAsBoolean()) {
                barrier.terminate();
                throw new CclException(what.get() + " cancelled (task killed) while waiting for the ranks of this process"
                        + " that share its GPU");
            }
            if (waited > timeoutNs) {
                barrier.terminate();
                throw new CclTimeoutException(what.get() + " timed out after " + TimeUnit.NANOSECONDS.toMillis(timeoutNs)
                        + " ms waiting for the other " + (parties - 1) + " rank(s) of this process that share its"
                        + " GPU to call it; a rank may be stuck or may have skipped this collective");
            }
        }
    }

    /** Ends the gate for every rank of it (a communicator that closes or fails takes no more part). */
    @Override
    public void close() {
        barrier.terminate();
        GATES.remove(key, barrier);
    }

    /**
     * A reusable barrier of {@code parties} threads that waits by spinning (the caller's loop above).
     * The last thread of a round resets the count, then advances the generation; a thread reads the
     * generation before it counts itself, so it can only count itself into the round it waits for.
     */
    private static final class Barrier {
        private final int parties;
        private final AtomicInteger arrived = new AtomicInteger();
        private volatile long generation;
        private volatile boolean terminated;

        Barrier(int parties) {
            this.parties = parties;
        }

        /** The generation to wait for the end of, or -1 when there is nothing to wait for. */
        long arrive() {
            if (terminated) {
                return -1;
            }
            long g = generation;
            if (arrived.incrementAndGet() == parties) {
                arrived.set(0);
                generation = g + 1;
                return -1;
            }
            return g;
        }

        boolean waiting(long g) {
            return generation == g && !terminated;
        }

        void terminate() {
            terminated = true;
        }
    }
}
