package org.sparkccl.train;

import java.util.SplittableRandom;

/**
 * Which examples (by global id, 0 .. n-1) make up the minibatch of each step: a fresh seeded
 * permutation per epoch, cut into batches, the last partial batch dropped. It depends only on
 * (n, batch size, seed, step), so every rank, the single-process reference, and a run resumed
 * from a checkpoint all see the same batches.
 */
public final class BatchSchedule {
    private final int n;
    private final int batchSize;
    private final long seed;
    private final int stepsPerEpoch;
    private long cachedEpoch = -1;
    private int[] permutation;

    public BatchSchedule(int n, int batchSize, long seed) {
        if (n < 1) {
            throw new IllegalArgumentException("no training examples");
        }
        this.n = n;
        this.batchSize = Math.min(batchSize, n);
        this.seed = seed;
        this.stepsPerEpoch = n / this.batchSize;
    }

    public int batchSize() {
        return batchSize;
    }

    public int stepsPerEpoch() {
        return stepsPerEpoch;
    }

    /** The global ids of step {@code step}'s batch (0-based step), into {@code out} (at least batchSize long). */
    public void batch(long step, int[] out) {
        long epoch = step / stepsPerEpoch;
        int first = (int) (step % stepsPerEpoch) * batchSize;
        int[] perm = permutation(epoch);
        System.arraycopy(perm, first, out, 0, batchSize);
    }

    private int[] permutation(long epoch) {
        if (epoch != cachedEpoch) {
            int[] p = new int[n];
            for (int i = 0; i < n; i++) {
                p[i] = i;
            }
            SplittableRandom random = new SplittableRandom(seed * 0x9E3779B97F4A7C15L + epoch);
            for (int i = n - 1; i > 0; i--) {
                int j = random.nextInt(i + 1);
                int t = p[i];
                p[i] = p[j];
                p[j] = t;
            }
            permutation = p;
            cachedEpoch = epoch;
        }
        return permutation;
    }
}
