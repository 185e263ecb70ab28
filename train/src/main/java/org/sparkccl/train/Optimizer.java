package org.sparkccl.train;

/**
 * Updates weights from the mean gradient of a step. Its state is named slots of the weights' shape
 * ({@link #slotNames()}), kept by the trainer and saved in checkpoints, so that a resumed run
 * continues exactly where it stopped.
 */
public interface Optimizer {
    String[] slotNames();

    /**
     * One update. {@code step} counts from 1 (Adam's bias correction needs it); {@code slots} are
     * the state arrays in {@link #slotNames()} order.
     */
    void update(float[] weights, float[] gradient, float[][] slots, long step);
}
