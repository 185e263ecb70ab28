package org.sparkccl.core;

import java.time.Duration;
import java.util.concurrent.BrokenBarrierException;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Ranks as threads of one JVM (tests, and tools run with ranks as threads): allGather through a
 * shared array and a barrier. Make one {@link Group} and hand {@link Group#member(int)} to each
 * rank's thread.
 */
public final class ThreadGroupBootstrap implements Bootstrap {
    private final Group group;
    private final int rank;

    /** The ranks that meet; shared by their threads. */
    public static final class Group {
        private final int size;
        private final CyclicBarrier barrier;
        private final byte[][] slots;
        private final Duration timeout;

        /** A group whose waits give up after {@code timeout}. */
        public Group(int size, Duration timeout) {
            this.size = size;
            this.barrier = new CyclicBarrier(size);
            this.slots = new byte[size][];
            this.timeout = timeout;
        }

        /** A group whose waits never give up (a tool that its caller can stop). */
        public Group(int size) {
            this(size, null);
        }

        public ThreadGroupBootstrap member(int rank) {
            return new ThreadGroupBootstrap(this, rank);
        }
    }

    private ThreadGroupBootstrap(Group group, int rank) {
        this.group = group;
        this.rank = rank;
    }

    @Override
    public int rank() {
        return rank;
    }

    @Override
    public int size() {
        return group.size;
    }

    @Override
    public byte[][] allGather(byte[] mine) {
        group.slots[rank] = mine;
        await();
        byte[][] out = group.slots.clone();
        await();
        return out;
    }

    @Override
    public void barrier() {
        await();
    }

    private void await() {
        try {
            if (group.timeout == null) {
                group.barrier.await();
            } else {
                group.barrier.await(group.timeout.toMillis(), TimeUnit.MILLISECONDS);
            }
        } catch (InterruptedException | BrokenBarrierException | TimeoutException e) {
            throw new IllegalStateException("thread bootstrap failed on rank " + rank, e);
        }
    }
}
