package org.sparkccl.train.gpu;

import java.util.Random;

/**
 * The CPU reference the GPU trainer is checked against: the models' loss gradients in float64 (the
 * same math as Mlp and SoftmaxRegression, written out plainly over {@link GpuNetwork}'s layout so
 * that the check does not lean on the code paths it checks), and the optimizers with the rounding of
 * MomentumSgd and Adam.
 */
final class TrainReference {
    private TrainReference() {
    }

    /**
     * Gradient sums over {@code rows[0 .. count)} of the shard {@code x} (row-major, {@code
     * network.inputs()} wide), then the summed loss: {@code parameterCount() + 1} values.
     */
    static double[] gradient(GpuNetwork net, float[] w, float[] x, int[] labels, int[] rows, int count) {
        int in = net.inputs();
        int hid = net.hidden();
        int classes = net.classes();
        int width = net.outputInputs();
        int outW = net.outputWeightsAt();
        int outB = net.outputBiasAt();
        double[] g = new double[net.parameterCount() + 1];
        double[] a = new double[width]; // the output layer's input: tanh(x W1 + b1), or x
        double[] z = new double[classes];
        double loss = 0;
        for (int n = 0; n < count; n++) {
            int xAt = rows[n] * in;
            if (net.hasHiddenLayer()) {
                for (int j = 0; j < hid; j++) {
                    double s = w[net.hiddenBiasAt() + j];
                    for (int i = 0; i < in; i++) {
                        s += (double) x[xAt + i] * w[net.hiddenWeightsAt() + i * hid + j];
                    }
                    a[j] = Math.tanh(s);
                }
            } else {
                for (int i = 0; i < in; i++) {
                    a[i] = x[xAt + i];
                }
            }
            double max = Double.NEGATIVE_INFINITY;
            for (int c = 0; c < classes; c++) {
                double s = w[outB + c];
                for (int j = 0; j < width; j++) {
                    s += a[j] * w[outW + j * classes + c];
                }
                z[c] = s;
                max = Math.max(max, s);
            }
            double sum = 0;
            for (int c = 0; c < classes; c++) {
                sum += Math.exp(z[c] - max);
            }
            int label = labels[rows[n]];
            loss += Math.log(sum) - (z[label] - max);
            for (int c = 0; c < classes; c++) {
                z[c] = Math.exp(z[c] - max) / sum - (c == label ? 1 : 0); // dLoss/dz
            }
            for (int j = 0; j < width; j++) {
                for (int c = 0; c < classes; c++) {
                    g[outW + j * classes + c] += a[j] * z[c];
                }
            }
            for (int c = 0; c < classes; c++) {
                g[outB + c] += z[c];
            }
            if (net.hasHiddenLayer()) {
                for (int j = 0; j < hid; j++) {
                    double back = 0;
                    for (int c = 0; c < classes; c++) {
                        back += w[outW + j * classes + c] * z[c];
                    }
                    double dh = back * (1 - a[j] * a[j]);
                    for (int i = 0; i < in; i++) {
                        g[net.hiddenWeightsAt() + i * hid + j] += x[xAt + i] * dh;
                    }
                    g[net.hiddenBiasAt() + j] += dh;
                }
            }
        }
        g[net.parameterCount()] = loss;
        return g;
    }

    /** MomentumSgd.update: float arithmetic, learning rate and momentum as floats. */
    static void momentumSgd(float[] w, float[] mean, float[] v, double learningRate, double momentum) {
        float lr = (float) learningRate;
        float mu = (float) momentum;
        for (int i = 0; i < w.length; i++) {
            v[i] = mu * v[i] + mean[i];
            w[i] -= lr * v[i];
        }
    }

    /** Adam.update: float moments, double arithmetic. */
    static void adam(float[] w, float[] g, float[] m, float[] v, long step, double lr, double beta1, double beta2,
                     double epsilon) {
        double correction1 = 1 - Math.pow(beta1, step);
        double correction2 = 1 - Math.pow(beta2, step);
        for (int i = 0; i < w.length; i++) {
            m[i] = (float) (beta1 * m[i] + (1 - beta1) * g[i]);
            v[i] = (float) (beta2 * v[i] + (1 - beta2) * g[i] * g[i]);
            double mHat = m[i] / correction1;
            double vHat = v[i] / correction2;
            w[i] -= (float) (lr * mHat / (Math.sqrt(vHat) + epsilon));
        }
    }

    /** One optimizer step of {@code opt} on the mean gradient. */
    static void update(GpuOptimizer opt, float[] w, float[] mean, float[][] slots, long step) {
        if (opt.kind() == GpuOptimizer.Kind.ADAM) {
            adam(w, mean, slots[0], slots[1], step, opt.learningRate(), opt.beta1(), opt.beta2(), opt.epsilon());
        } else {
            momentumSgd(w, mean, slots[0], opt.learningRate(), opt.momentum());
        }
    }

    /** Standard normal floats. */
    static float[] gaussian(Random random, int n, double scale) {
        float[] a = new float[n];
        for (int i = 0; i < n; i++) {
            a[i] = (float) (random.nextGaussian() * scale);
        }
        return a;
    }

    static int[] labels(Random random, int n, int classes) {
        int[] a = new int[n];
        for (int i = 0; i < n; i++) {
            a[i] = random.nextInt(classes);
        }
        return a;
    }
}
