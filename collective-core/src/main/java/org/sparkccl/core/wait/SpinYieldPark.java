package org.sparkccl.core.wait;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.agrona.concurrent.IdleStrategy;

/**
 * How every sparkccl wait idles, host engine and GPU engine alike: spin a few polls, then yield the
 * core for a while (staying runnable), then park with pauses that double up to a cap.
 *
 * <p>Why a long yield phase, by time rather than by count: a park wakes 50 us or more late (the
 * kernel's timer slack), so a rank that parks while its peer finishes a 256 KB - 2 MB all-reduce,
 * or while its GPU runs a 256 MB one (~0.8 ms), pays that on every call. Measured: 2 rank JVMs,
 * direct all-reduce, median call 256 KB 131 -> 15 us and 1 MB 95-279 -> 64 us once a rank yielded
 * for ~20 ms instead of 200 yields; GPU, 256 MB 862 -> 795-814 us per call. A yield is a
 * sched_yield: where nothing else wants the core it returns at once, where a peer rank does (more
 * ranks than cores) it hands the core over. Long waits (a slow peer, a rank between training steps)
 * still end up parked.
 *
 * <p>One per waiting thread: not thread safe.
 */
public final class SpinYieldPark implements IdleStrategy {
    /** The yield phase every engine uses. */
    public static final long DEFAULT_YIELD_NANOS = TimeUnit.MILLISECONDS.toNanos(20);

    private final int spins;
    private final long yieldNanos;
    private final long minParkNanos;
    private final long maxParkNanos;
    private int spun;
    private boolean yielding;
    private long yieldingSince;
    private long parkNanos;

    /**
     * {@code spins} polls, then yields for {@code yieldNanos}, then parks from {@code minParkNanos}
     * doubling to {@code maxParkNanos}.
     */
    public SpinYieldPark(int spins, long yieldNanos, long minParkNanos, long maxParkNanos) {
        if (spins < 0 || yieldNanos < 0 || minParkNanos < 1 || maxParkNanos < minParkNanos) {
            throw new IllegalArgumentException("need spins >= 0, yield >= 0 and 1 <= min park <= max park; got " + spins
                    + ", " + yieldNanos + ", " + minParkNanos + ", " + maxParkNanos);
        }
        this.spins = spins;
        this.yieldNanos = yieldNanos;
        this.minParkNanos = minParkNanos;
        this.maxParkNanos = maxParkNanos;
        reset();
    }

    @Override
    public void idle(int workCount) {
        if (workCount > 0) {
            reset();
        } else {
            idle();
        }
    }

    @Override
    public void idle() {
        if (spun < spins) {
            spun++;
            Thread.onSpinWait();
            return;
        }
        long now = System.nanoTime();
        if (!yielding) {
            yielding = true;
            yieldingSince = now;
        }
        if (now - yieldingSince < yieldNanos) {
            Thread.yield();
            return;
        }
        LockSupport.parkNanos(parkNanos);
        parkNanos = Math.min(parkNanos << 1, maxParkNanos);
    }

    @Override
    public void reset() {
        spun = 0;
        yielding = false;
        parkNanos = minParkNanos;
    }

    /** Whether the spins are over (the caller may then do its slower checks). */
    public boolean pastSpinning() {
        return spun >= spins;
    }

    @Override
    public String alias() {
        return "spin-yield-park";
    }
}
