package org.sparkccl.train;

import java.util.Random;
import org.sparkccl.arrow.TensorLayout;

/**
 * A small multilayer perceptron: {@code p = softmax(tanh(x W1 + b1) W2 + b2)}. tanh rather than ReLU
 * because it is smooth, so distributed and single-process runs cannot part ways at a kink.
 */
public final class Mlp implements Model {
    private final int inputs;
    private final int hidden;
    private final int classes;
    private final TensorLayout layout;
    private final int b1At;
    private final int w2At;
    private final int b2At;

    public Mlp(int inputs, int hidden, int classes) {
        this.inputs = inputs;
        this.hidden = hidden;
        this.classes = classes;
        this.layout = TensorLayout.builder().add("W1", inputs, hidden).add("b1", hidden)
                .add("W2", hidden, classes).add("b2", classes).build();
        this.b1At = inputs * hidden;
        this.w2At = b1At + hidden;
        this.b2At = w2At + hidden * classes;
    }

    @Override
    public TensorLayout layout() {
        return layout;
    }

    @Override
    public void initialize(float[] w, long seed) {
        Random random = new Random(seed);
        double scale1 = 1.0 / Math.sqrt(inputs);
        for (int i = 0; i < inputs * hidden; i++) {
            w[i] = (float) (random.nextGaussian() * scale1);
        }
        double scale2 = 1.0 / Math.sqrt(hidden);
        for (int i = 0; i < hidden * classes; i++) {
            w[w2At + i] = (float) (random.nextGaussian() * scale2);
        }
        // Biases start at zero.
        for (int j = 0; j < hidden; j++) {
            w[b1At + j] = 0f;
        }
        for (int c = 0; c < classes; c++) {
            w[b2At + c] = 0f;
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

    private double run(float[] w, FeatureBatch data, int[] rows, int count, double[] g, long[] correct) {
        float[] x = data.features();
        int cols = data.cols();
        double[] h = new double[hidden];
        double[] z = new double[classes];
        double[] dh = new double[hidden];
        double loss = 0;
        for (int n = 0; n < count; n++) {
            int row = rows[n];
            int xAt = row * cols;
            for (int j = 0; j < hidden; j++) {
                h[j] = w[b1At + j];
            }
            for (int i = 0; i < inputs; i++) {
                double xi = x[xAt + i];
                if (xi != 0) {
                    int wAt = i * hidden;
                    for (int j = 0; j < hidden; j++) {
                        h[j] += xi * w[wAt + j];
                    }
                }
            }
            for (int j = 0; j < hidden; j++) {
                h[j] = Math.tanh(h[j]);
            }
            for (int c = 0; c < classes; c++) {
                z[c] = w[b2At + c];
            }
            for (int j = 0; j < hidden; j++) {
                int wAt = w2At + j * classes;
                for (int c = 0; c < classes; c++) {
                    z[c] += h[j] * w[wAt + c];
                }
            }
            int label = data.classLabel(row);
            loss += SoftmaxMath.softmaxCrossEntropy(z, label);
            if (correct != null && SoftmaxMath.argmax(z) == label) {
                correct[0]++;
            }
            if (g == null) {
                continue;
            }
            z[label] -= 1; // dLoss/dz
            for (int j = 0; j < hidden; j++) {
                int wAt = w2At + j * classes;
                double back = 0;
                for (int c = 0; c < classes; c++) {
                    g[wAt + c] += h[j] * z[c];
                    back += w[wAt + c] * z[c];
                }
                dh[j] = back * (1 - h[j] * h[j]); // through tanh
            }
            for (int c = 0; c < classes; c++) {
                g[b2At + c] += z[c];
            }
            for (int i = 0; i < inputs; i++) {
                double xi = x[xAt + i];
                if (xi != 0) {
                    int gAt = i * hidden;
                    for (int j = 0; j < hidden; j++) {
                        g[gAt + j] += xi * dh[j];
                    }
                }
            }
            for (int j = 0; j < hidden; j++) {
                g[b1At + j] += dh[j];
            }
        }
        return loss;
    }
}
