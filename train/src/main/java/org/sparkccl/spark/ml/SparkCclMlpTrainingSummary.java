package org.sparkccl.spark.ml;

import java.io.Serializable;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.sparkccl.train.TrainedClassifier;
import org.sparkccl.train.TrainingData;

/**
 * What {@link SparkCclMlpClassifier#fit} saw while it trained: the loss of every step, and the
 * final weights' loss and accuracy on the whole training set, computed when first asked for (one
 * Spark job over the training rows, as Spark's own training summaries compute theirs, so that a fit
 * whose caller never asks does not pay for the pass). Kept on the fitted model (not saved with it,
 * as Spark's own training summaries are not).
 */
public final class SparkCclMlpTrainingSummary implements Serializable {
    private static final long serialVersionUID = 1L;

    private final double[] lossHistory;
    private final int ranks;
    private final long trainingRows;
    private final TrainedClassifier classifier;
    private final transient Dataset<Row> training;
    private final String featuresCol;
    private final String labelCol;
    private TrainedClassifier.Evaluation evaluation;

    SparkCclMlpTrainingSummary(double[] lossHistory, int ranks, long trainingRows, TrainedClassifier classifier,
                               Dataset<Row> training, String featuresCol, String labelCol) {
        this.lossHistory = lossHistory.clone();
        this.ranks = ranks;
        this.trainingRows = trainingRows;
        this.classifier = classifier;
        this.training = training;
        this.featuresCol = featuresCol;
        this.labelCol = labelCol;
    }

    /** Mean minibatch cross-entropy of each step, before that step's update (step 1 first). */
    public double[] lossHistory() {
        return lossHistory.clone();
    }

    /** Steps run: {@code maxIter}. */
    public int totalIterations() {
        return lossHistory.length;
    }

    /** Mean cross-entropy of the final weights over the whole training set (a Spark job, the first time). */
    public double trainingLoss() {
        return evaluation().loss();
    }

    /**
     * Fraction of the training set the final weights classify right (a Spark job, the first time;
     * held-out data: use an evaluator).
     */
    public double trainingAccuracy() {
        return evaluation().accuracy();
    }

    private synchronized TrainedClassifier.Evaluation evaluation() {
        if (evaluation == null) {
            if (training == null) {
                throw new IllegalStateException("this training summary was serialized without its training data:"
                        + " ask the fitted model's summary() in the driver that fitted it");
            }
            evaluation = classifier.evaluate(TrainingData.examples(training, featuresCol, labelCol));
        }
        return evaluation;
    }

    /** Barrier tasks that trained (sparkccl ranks). */
    public int ranks() {
        return ranks;
    }

    public long trainingRows() {
        return trainingRows;
    }
}
