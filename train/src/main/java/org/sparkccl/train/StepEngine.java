package org.sparkccl.train;

import org.apache.arrow.memory.BufferAllocator;

/**
 * Where one rank runs its training steps: the gradient of its rows, the sum over ranks, and the
 * optimizer's update. The trainer keeps the schedule, checkpoints and evaluation, and sees the
 * weights only through {@link #load} and {@link #store}, so an engine may keep them elsewhere than
 * the JVM heap (the GPU engine keeps them in device memory).
 */
public interface StepEngine extends AutoCloseable {
    /** Sets the weights and the optimizer's slots (in {@link Optimizer#slotNames()} order); the same on every rank. */
    void load(float[] weights, float[][] slots);

    /**
     * One step, every rank together: the gradient of this rank's rows {@code localRows[0 .. count)}
     * (rows of its shard), summed over ranks, divided by the global batch's {@code globalRows} and
     * applied. {@code step} counts from 1. Fails before updating when the ranks' rows do not add
     * up to {@code globalRows}.
     *
     * @return the loss summed over the global batch, before the update (a float32 sum)
     */
    double step(int[] localRows, int count, int globalRows, long step);

    /** Copies the weights, and the slots unless {@code slots} is null, out. */
    void store(float[] weights, float[][] slots);

    /** For the log: where the steps run. */
    String describe();

    /** Frees what the engine holds; called after the rank's last collective. */
    @Override
    void close();

    /** Opens a rank's engine, before the trainer's first collective. */
    @FunctionalInterface
    interface Factory {
        StepEngine open(TrainConfig config, Shard shard, int batchSize, StepCollectives collectives,
                        BufferAllocator allocator);
    }
}
