package org.sparkccl.train;

import java.util.Random;

/**
 * One affine layer {@code y = x W + b} over a row, with W of shape [inputs, outputs] (row-major) and
 * then b, both inside a model's flat parameter array from {@code weightsAt}. Values are float in the
 * parameters and double in the activations and gradient sums, as every model keeps them. A zero
 * input adds nothing, so it is skipped: feature rows are often mostly zeros.
 */
final class AffineLayer {
    private final int inputs;
    private final int outputs;
    private final int weightsAt;
    private final int biasAt;

    AffineLayer(int inputs, int outputs, int weightsAt) {
        this.inputs = inputs;
        this.outputs = outputs;
        this.weightsAt = weightsAt;
        this.biasAt = weightsAt + inputs * outputs;
    }

    /** Where the next layer's parameters start. */
    int end() {
        return biasAt + outputs;
    }

    /** Gaussian weights scaled by 1/sqrt(inputs), so the outputs start near unit size; zero biases. */
    void initialize(float[] params, Random random) {
        double scale = 1.0 / Math.sqrt(inputs);
        for (int i = 0; i < inputs * outputs; i++) {
            params[weightsAt + i] = (float) (random.nextGaussian() * scale);
        }
        for (int c = 0; c < outputs; c++) {
            params[biasAt + c] = 0f;
        }
    }

    /** {@code y = x W + b}. */
    void forward(float[] params, double[] x, double[] y) {
        for (int c = 0; c < outputs; c++) {
            y[c] = params[biasAt + c];
        }
        for (int i = 0; i < inputs; i++) {
            double xi = x[i];
            if (xi != 0) {
                int wAt = weightsAt + i * outputs;
                for (int c = 0; c < outputs; c++) {
                    y[c] += xi * params[wAt + c];
                }
            }
        }
    }

    /**
     * Given {@code dy} = dLoss/dy, adds dLoss/dW and dLoss/db to {@code gradient} (same layout as the
     * parameters) and, unless {@code dx} is null, writes dLoss/dx = dy W^T.
     */
    void backward(float[] params, double[] x, double[] dy, double[] gradient, double[] dx) {
        for (int i = 0; i < inputs; i++) {
            int wAt = weightsAt + i * outputs;
            double xi = x[i];
            if (xi != 0) {
                for (int c = 0; c < outputs; c++) {
                    gradient[wAt + c] += xi * dy[c];
                }
            }
            if (dx != null) {
                double back = 0;
                for (int c = 0; c < outputs; c++) {
                    back += params[wAt + c] * dy[c];
                }
                dx[i] = back;
            }
        }
        for (int c = 0; c < outputs; c++) {
            gradient[biasAt + c] += dy[c];
        }
    }
}
