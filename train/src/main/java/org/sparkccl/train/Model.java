package org.sparkccl.train;

import org.sparkccl.arrow.TensorLayout;

/**
 * A classifier whose parameters are one flat float array laid out as {@link #layout()} says, and
 * that can add up its loss gradient over chosen rows of a batch. Sums, not means: the trainer adds
 * the sums of all ranks and divides once by the global batch size, so the result does not depend
 * on how the batch was split.
 */
public interface Model {
    TensorLayout layout();

    /** Fills {@code weights} with the initial parameters for {@code seed}; the same on every rank. */
    void initialize(float[] weights, long seed);

    /**
     * Adds the gradient of the cross-entropy loss summed over {@code rows[0 .. count)} of {@code data}
     * to {@code gradient}, and returns that summed loss.
     */
    double addGradient(float[] weights, FeatureBatch data, int[] rows, int count, double[] gradient);

    /** Summed loss over the rows, without the gradient; adds the rows it classifies right to {@code correct[0]}. */
    double evaluate(float[] weights, FeatureBatch data, int[] rows, int count, long[] correct);

    /** The class scores (before the softmax) of one row {@code x} of already scaled features, into {@code z}. */
    void logits(float[] weights, double[] x, double[] z);
}
