package org.sparkccl.train;

import java.io.Serializable;

/** What one rank's training produced: the loss of each step it ran, its final weights, and its speed. */
public final class TrainResult implements Serializable {
    private static final long serialVersionUID = 1L;

    private final int rank;
    private final long firstStep;
    private final double[] losses;
    private final float[] weights;
    private final double samplesPerSecond;
    private final double finalLoss;
    private final double accuracy;

    public TrainResult(int rank, long firstStep, double[] losses, float[] weights, double samplesPerSecond,
                       double finalLoss, double accuracy) {
        this.rank = rank;
        this.firstStep = firstStep;
        this.losses = losses;
        this.weights = weights;
        this.samplesPerSecond = samplesPerSecond;
        this.finalLoss = finalLoss;
        this.accuracy = accuracy;
    }

    /** Mean loss of the final weights over the whole training set. */
    public double finalLoss() {
        return finalLoss;
    }

    /** Fraction of the whole training set the final weights classify right. */
    public double accuracy() {
        return accuracy;
    }

    public int rank() {
        return rank;
    }

    /** The step this run started at: 0, or the step of the checkpoint it resumed from. */
    public long firstStep() {
        return firstStep;
    }

    /** Mean minibatch loss of steps firstStep, firstStep + 1, ... (before each step's update). */
    public double[] losses() {
        return losses.clone();
    }

    public float[] weights() {
        return weights.clone();
    }

    /** Global samples per second over the steps run (all ranks together). */
    public double samplesPerSecond() {
        return samplesPerSecond;
    }
}
