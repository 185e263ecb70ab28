package org.sparkccl.spark.ml;

import java.io.Serializable;

/**
 * What {@link SparkCclMlpClassifier#fit} saw while it trained: the loss of every step and the
 * final weights' loss and accuracy on the whole training set. Kept on the fitted model (not saved
 * with it, as Spark's own training summaries are not).
 */
public final class SparkCclMlpTrainingSummary implements Serializable {
    private static final long serialVersionUID = 1L;

    private final double[] lossHistory;
    private final double trainingLoss;
    private final double trainingAccuracy;
    private final int ranks;
    private final long trainingRows;

    SparkCclMlpTrainingSummary(double[] lossHistory, double trainingLoss, double trainingAccuracy, int ranks,
                               long trainingRows) {
        this.lossHistory = lossHistory.clone();
        this.trainingLoss = trainingLoss;
        this.trainingAccuracy = trainingAccuracy;
        this.ranks = ranks;
        this.trainingRows = trainingRows;
    }

    /** Mean minibatch cross-entropy of each step, before that step's update (step 1 first). */
    public double[] lossHistory() {
        return lossHistory.clone();
    }

    /** Steps run: {@code maxIter}. */
    public int totalIterations() {
        return lossHistory.length;
    }

    /** Mean cross-entropy of the final weights over the whole training set. */
    public double trainingLoss() {
        return trainingLoss;
    }

    /** Fraction of the training set the final weights classify right (held-out data: use an evaluator). */
    public double trainingAccuracy() {
        return trainingAccuracy;
    }

    /** Barrier tasks that trained (sparkccl ranks). */
    public int ranks() {
        return ranks;
    }

    public long trainingRows() {
        return trainingRows;
    }
}
