package org.sparkccl.train;

import java.util.Random;
import org.sparkccl.arrow.TensorLayout;

/** Multinomial logistic regression: {@code p = softmax(x W + b)}, W of shape [inputs, classes]. */
public final class SoftmaxRegression implements Model {
    private final int inputs;
    private final int classes;
    private final TensorLayout layout;

    public SoftmaxRegression(int inputs, int classes) {
        this.inputs = inputs;
        this.classes = classes;
        this.layout = TensorLayout.builder().add("W", inputs, classes).add("b", classes).build();
    }

    @Override
    public TensorLayout layout() {
        return layout;
    }

    @Override
    public void initialize(float[] weights, long seed) {
        Random random = new Random(seed);
        double scale = 1.0 / Math.sqrt(inputs);
        for (int i = 0; i < inputs * classes; i++) {
            weights[i] = (float) (random.nextGaussian() * scale);
        }
        for (int c = 0; c < classes; c++) {
            weights[inputs * classes + c] = 0f;
        }
    }

    @Override
    public double addGradient(float[] w, FeatureBatch data, int[] rows, int count, double[] gradient) {
        return run(w, data, rows, count, gradient, null);
    }

    @Override
    public double evaluate(float[] w, FeatureBatch data, int[] rows, int count, long[] correct) {
        return run(w, data, rows, count, null, correct);
    }

    private double run(float[] w, FeatureBatch data, int[] rows, int count, double[] gradient, long[] correct) {
        float[] x = data.features();
        int cols = data.cols();
        int biasAt = inputs * classes;
        double[] z = new double[classes];
        double loss = 0;
        for (int n = 0; n < count; n++) {
            int row = rows[n];
            int xAt = row * cols;
            for (int c = 0; c < classes; c++) {
                z[c] = w[biasAt + c];
            }
            for (int i = 0; i < inputs; i++) {
                double xi = x[xAt + i];
                if (xi != 0) {
                    int wAt = i * classes;
                    for (int c = 0; c < classes; c++) {
                        z[c] += xi * w[wAt + c];
                    }
                }
            }
            int label = data.classLabel(row);
            loss += SoftmaxMath.softmaxCrossEntropy(z, label);
            if (correct != null && SoftmaxMath.argmax(z) == label) {
                correct[0]++;
            }
            if (gradient == null) {
                continue;
            }
            z[label] -= 1; // now dLoss/dz
            for (int i = 0; i < inputs; i++) {
                double xi = x[xAt + i];
                if (xi != 0) {
                    int gAt = i * classes;
                    for (int c = 0; c < classes; c++) {
                        gradient[gAt + c] += xi * z[c];
                    }
                }
            }
            for (int c = 0; c < classes; c++) {
                gradient[biasAt + c] += z[c];
            }
        }
        return loss;
    }
}
