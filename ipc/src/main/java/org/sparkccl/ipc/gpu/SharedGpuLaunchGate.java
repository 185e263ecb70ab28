package org.sparkccl.ipc.gpu;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Phaser;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.BooleanSupplier;
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
    private static final Map<String, Phaser> GATES = new ConcurrentHashMap<>();
    /** How often a rank waiting at the gate checks for cancellation and its deadline. */
    private static final long CHECK_EVERY_MS = 20;

    private final String key;
    private final Phaser phaser;
    private final int parties;

    /** The gate of the {@code parties} ranks that share a GPU in this process, in communicator {@code id}. */
    SharedGpuLaunchGate(String id, int device, int parties) {
        this.key = id + "/gpu" + device;
        this.parties = parties;
        this.phaser = GATES.computeIfAbsent(key, k -> new Phaser(parties));
    }

    /**
     * Returns when every rank of the gate has called this for the same collective, or the gate has
     * ended; throws when {@code cancelled} turns true or {@code timeoutNs} passes first.
     */
    void awaitPeers(BooleanSupplier cancelled, long timeoutNs, String what) {
        int phase = phaser.arrive();
        long deadline = System.nanoTime() + timeoutNs;
        while (true) {
            try {
                phaser.awaitAdvanceInterruptibly(phase, CHECK_EVERY_MS, TimeUnit.MILLISECONDS);
                return;
            } catch (TimeoutException e) {
                if (cancelled.getAsBoolean()) {
                    phaser.forceTermination();
                    throw new CclException(what + " cancelled (task killed) while waiting for the ranks of this process"
                            + " that share its GPU");
                }
                if (System.nanoTime() - deadline > 0) {
                    phaser.forceTermination();
                    throw new CclTimeoutException(what + " timed out after " + TimeUnit.NANOSECONDS.toMillis(timeoutNs)
                            + " ms waiting for the other " + (parties - 1) + " rank(s) of this process that share its"
                            + " GPU to call it; a rank may be stuck or may have skipped this collective");
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                phaser.forceTermination();
                throw new CclException(what + " interrupted while waiting for the ranks of this process that share its GPU");
            }
        }
    }

    /** Ends the gate for every rank of it (a communicator that closes or fails takes no more part). */
    @Override
    public void close() {
        phaser.forceTermination();
        GATES.remove(key, phaser);
    }
}
