package org.sparkccl.train;

import java.io.Serializable;
import org.apache.spark.api.java.JavaRDD;

/**
 * What training leaves: the model's shape, the feature scaling the trainer applied (each feature
 * divided by its largest magnitude in the training data) and the final weights. Scores raw feature
 * rows the way the trainer saw them, so it can run anywhere: on the driver, inside a Spark task
 * (it is small and serializable), or after being saved and read back.
 */
public final class TrainedClassifier implements Serializable {
    private static final long serialVersionUID = 1L;

    private final ModelSpec spec;
    private final float[] featureMaxAbs;
    private final float[] weights;
    private transient Model model;

    public TrainedClassifier(ModelSpec spec, float[] featureMaxAbs, float[] weights) {
        if (featureMaxAbs.length != spec.inputs()) {
            throw new IllegalArgumentException(spec + " takes " + spec.inputs() + " features, the scaling has "
                    + featureMaxAbs.length);
        }
        long expected = spec.create().layout().elementCount();
        if (weights.length != expected) {
            throw new IllegalArgumentException(spec + " has " + expected + " parameters, got " + weights.length
                    + " weights: they belong to another model");
        }
        this.spec = spec;
        this.featureMaxAbs = featureMaxAbs.clone();
        this.weights = weights.clone();
    }

    /** The model {@code result} trained, with the scaling of the data {@code stats} describes. */
    public static TrainedClassifier of(TrainConfig config, DataStats stats, TrainResult result) {
        return new TrainedClassifier(config.model(), stats.featureMaxAbs(), result.weights());
    }

    public ModelSpec spec() {
        return spec;
    }

    public float[] featureMaxAbs() {
        return featureMaxAbs.clone();
    }

    public float[] weights() {
        return weights.clone();
    }

    private Model model() {
        if (model == null) {
            model = spec.create();
        }
        return model;
    }

    /**
     * The class scores (logits, before the softmax) of one row of raw features into {@code scores};
     * the features are scaled as in training, in float as the trainer does.
     */
    public void logits(double[] features, double[] scores) {
        if (features.length != spec.inputs()) {
            throw new IllegalArgumentException("a row of " + features.length + " features; the model " + spec
                    + " was trained on " + spec.inputs());
        }
        double[] x = new double[features.length];
        for (int i = 0; i < x.length; i++) {
            float v = (float) features[i];
            x[i] = featureMaxAbs[i] == 0 ? v : v / featureMaxAbs[i];
        }
        model().logits(weights, x, scores);
    }

    /** Class scores (logits) into class probabilities, in place: the softmax the trainer's loss uses. */
    public static void probabilitiesInPlace(double[] scores) {
        SoftmaxMath.softmaxInPlace(scores);
    }

    /** The most likely class of one row of raw features. */
    public int predict(double[] features) {
        double[] z = new double[spec.classes()];
        logits(features, z);
        return SoftmaxMath.argmax(z);
    }

    /** Mean cross-entropy loss and accuracy on {@code examples} (held-out data), computed where they are. */
    public Evaluation evaluate(JavaRDD<Example> examples) {
        TrainedClassifier self = this;
        double[] totals = examples.mapPartitions(part -> {
            double[] t = new double[3];
            double[] x = new double[spec.inputs()];
            double[] z = new double[spec.classes()];
            while (part.hasNext()) {
                Example e = part.next();
                for (int i = 0; i < x.length; i++) {
                    x[i] = e.features[i];
                }
                self.logits(x, z);
                int label = (int) e.label;
                t[0] += label < z.length ? SoftmaxMath.softmaxCrossEntropy(z, label) : Double.POSITIVE_INFINITY;
                t[1] += label < z.length && SoftmaxMath.argmax(z) == label ? 1 : 0;
                t[2]++;
            }
            return java.util.List.of(t).iterator();
        }).reduce((a, b) -> new double[] {a[0] + b[0], a[1] + b[1], a[2] + b[2]});
        return new Evaluation((long) totals[2], totals[0] / totals[2], totals[1] / totals[2]);
    }

    /** Loss and accuracy over some examples. */
    public record Evaluation(long rows, double loss, double accuracy) implements Serializable {
    }
}
