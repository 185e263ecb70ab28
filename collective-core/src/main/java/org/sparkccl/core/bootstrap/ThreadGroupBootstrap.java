package org.sparkccl.core.bootstrap;

import org.sparkccl.core.Bootstrap;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
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

        /**
         * Runs {@code task} once per rank, each on a thread of its own with its member of this group,
         * and returns the results in rank order. Waits at most {@code wait} for each rank (null: no
         * limit). When ranks fail, throws the first rank's exception with the others suppressed.
         */
        public <T> List<T> run(RankTask<T> task, Duration wait) throws Exception {
            ExecutorService pool = Executors.newFixedThreadPool(size);
            try {
                List<Future<T>> futures = new ArrayList<>();
                for (int r = 0; r < size; r++) {
                    ThreadGroupBootstrap member = member(r);
                    futures.add(pool.submit(() -> task.run(member)));
                }
                List<T> results = new ArrayList<>();
                Exception first = null;
                for (Future<T> f : futures) {
                    try {
                        results.add(wait == null ? f.get() : f.get(wait.toMillis(), TimeUnit.MILLISECONDS));
                    } catch (ExecutionException e) {
                        Exception cause = e.getCause() instanceof Exception ? (Exception) e.getCause() : e;
                        if (first == null) {
                            first = cause;
                        } else {
                            first.addSuppressed(cause);
                        }
                    }
                }
                if (first != null) {
                    throw first;
                }
                return results;
            } finally {
                pool.shutdownNow();
            }
        }
    }

    /** What one rank's thread does in {@link Group#run}. */
    public interface RankTask<T> {
        T run(ThreadGroupBootstrap bootstrap) throws Exception;
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
