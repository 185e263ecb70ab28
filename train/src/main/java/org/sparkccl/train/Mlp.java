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
    private final AffineLayer first;
    private final AffineLayer second;

    public Mlp(int inputs, int hidden, int classes) {
        this.inputs = inputs;
        this.hidden = hidden;
        this.classes = classes;
        this.layout = TensorLayout.builder().add("W1", inputs, hidden).add("b1", hidden)
                .add("W2", hidden, classes).add("b2", classes).build();
        this.first = new AffineLayer(inputs, hidden, 0);
        this.second = new AffineLayer(hidden, classes, first.end());
    }

    @Override
    public TensorLayout layout() {
        return layout;
    }

    @Override
    public void initialize(float[] w, long seed) {
        Random random = new Random(seed);
        first.initialize(w, random);
        second.initialize(w, random);
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
        double[] x = new double[inputs];
        double[] h = new double[hidden];
        double[] z = new double[classes];
        double[] dh = new double[hidden];
        double loss = 0;
        for (int n = 0; n < count; n++) {
            int row = rows[n];
            data.copyRow(row, x);
            first.forward(w, x, h);
            for (int j = 0; j < hidden; j++) {
                h[j] = Math.tanh(h[j]);
            }
            second.forward(w, h, z);
            int label = data.classLabel(row);
            loss += SoftmaxMath.softmaxCrossEntropy(z, label);
            if (correct != null && SoftmaxMath.argmax(z) == label) {
                correct[0]++;
            }
            if (g == null) {
                continue;
            }
            z[label] -= 1; // dLoss/dz
            second.backward(w, h, z, g, dh);
            for (int j = 0; j < hidden; j++) {
                dh[j] *= 1 - h[j] * h[j]; // through tanh
            }
            first.backward(w, x, dh, g, null);
        }
        return loss;
    }
}
