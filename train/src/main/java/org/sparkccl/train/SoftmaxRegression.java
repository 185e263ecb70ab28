package org.sparkccl.train;

import java.util.Random;
import org.sparkccl.arrow.TensorLayout;

/** Multinomial logistic regression: {@code p = softmax(x W + b)}, W of shape [inputs, classes]. */
public final class SoftmaxRegression implements Model {
    private final int inputs;
    private final int classes;
    private final TensorLayout layout;
    private final AffineLayer affine;

    public SoftmaxRegression(int inputs, int classes) {
        this.inputs = inputs;
        this.classes = classes;
        this.layout = TensorLayout.builder().add("W", inputs, classes).add("b", classes).build();
        this.affine = new AffineLayer(inputs, classes, 0);
    }

    @Override
    public TensorLayout layout() {
        return layout;
    }

    @Override
    public void initialize(float[] weights, long seed) {
        affine.initialize(weights, new Random(seed));
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
        affine.forward(w, x, z);
    }

    private double run(float[] w, FeatureBatch data, int[] rows, int count, double[] gradient, long[] correct) {
        double[] x = new double[inputs];
        double[] z = new double[classes];
        double loss = 0;
        for (int n = 0; n < count; n++) {
            int row = rows[n];
            data.copyRow(row, x);
            affine.forward(w, x, z);
            int label = data.classLabel(row);
            loss += SoftmaxMath.softmaxCrossEntropy(z, label);
            if (correct != null && SoftmaxMath.argmax(z) == label) {
                correct[0]++;
            }
            if (gradient == null) {
                continue;
            }
            z[label] -= 1; // now dLoss/dz
            affine.backward(w, x, z, gradient, null);
        }
        return loss;
    }
}
