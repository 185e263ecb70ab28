package org.sparkccl.train;

import java.util.Arrays;
import java.util.Random;
import org.sparkccl.arrow.TensorLayout;

/**
 * A multilayer perceptron: {@code p = softmax(tanh(... tanh(x W1 + b1) ...) Wn + bn)}, one or more
 * hidden layers. tanh rather than ReLU because it is smooth, so distributed and single-process runs
 * cannot part ways at a kink. With one hidden layer the parameters are laid out as W1, b1, W2, b2,
 * the layout the GPU kernels and existing checkpoints have.
 */
public final class Mlp implements Model {
    private final int[] widths;
    private final TensorLayout layout;
    private final AffineLayer[] layers;

    public Mlp(int inputs, int hidden, int classes) {
        this(inputs, new int[] {hidden}, classes);
    }

    /** {@code hidden}: the widths of the hidden layers, first to last (at least one). */
    public Mlp(int inputs, int[] hidden, int classes) {
        if (hidden.length == 0) {
            throw new IllegalArgumentException("an MLP needs at least one hidden layer; use SoftmaxRegression for none");
        }
        widths = new int[hidden.length + 2];
        widths[0] = inputs;
        System.arraycopy(hidden, 0, widths, 1, hidden.length);
        widths[widths.length - 1] = classes;
        TensorLayout.Builder builder = TensorLayout.builder();
        layers = new AffineLayer[widths.length - 1];
        int at = 0;
        for (int l = 0; l < layers.length; l++) {
            builder.add("W" + (l + 1), widths[l], widths[l + 1]).add("b" + (l + 1), widths[l + 1]);
            layers[l] = new AffineLayer(widths[l], widths[l + 1], at);
            at = layers[l].end();
        }
        layout = builder.build();
    }

    @Override
    public TensorLayout layout() {
        return layout;
    }

    @Override
    public void initialize(float[] w, long seed) {
        Random random = new Random(seed);
        for (AffineLayer layer : layers) {
            layer.initialize(w, random);
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

    @Override
    public void logits(float[] w, double[] x, double[] z) {
        double[][] a = activations();
        forward(w, x, a, z);
    }

    /** a[l]: the output of hidden layer l (after tanh). */
    private double[][] activations() {
        double[][] a = new double[layers.length - 1][];
        for (int l = 0; l < a.length; l++) {
            a[l] = new double[widths[l + 1]];
        }
        return a;
    }

    private void forward(float[] w, double[] x, double[][] a, double[] z) {
        double[] in = x;
        for (int l = 0; l < a.length; l++) {
            layers[l].forward(w, in, a[l]);
            for (int j = 0; j < a[l].length; j++) {
                a[l][j] = Math.tanh(a[l][j]);
            }
            in = a[l];
        }
        layers[layers.length - 1].forward(w, in, z);
    }

    private double run(float[] w, FeatureBatch data, int[] rows, int count, double[] g, long[] correct) {
        double[] x = new double[data.cols()];
        double[][] a = activations();
        double[] z = new double[widths[widths.length - 1]];
        // delta[l]: dLoss/d(output of hidden layer l), before and then through its tanh.
        double[][] delta = activations();
        double loss = 0;
        for (int n = 0; n < count; n++) {
            int row = rows[n];
            data.copyRow(row, x);
            forward(w, x, a, z);
            int label = data.classLabel(row);
            loss += SoftmaxMath.softmaxCrossEntropy(z, label);
            if (correct != null && SoftmaxMath.argmax(z) == label) {
                correct[0]++;
            }
            if (g == null) {
                continue;
            }
            z[label] -= 1; // dLoss/dz
            double[] dy = z;
            for (int l = layers.length - 1; l >= 0; l--) {
                double[] in = l == 0 ? x : a[l - 1];
                double[] dx = l == 0 ? null : delta[l - 1];
                layers[l].backward(w, in, dy, g, dx);
                if (dx != null) {
                    for (int j = 0; j < dx.length; j++) {
                        dx[j] *= 1 - in[j] * in[j]; // through tanh
                    }
                    dy = dx;
                }
            }
        }
        return loss;
    }

    @Override
    public String toString() {
        return "Mlp" + Arrays.toString(widths);
    }
}
