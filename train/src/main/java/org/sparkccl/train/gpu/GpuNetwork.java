package org.sparkccl.train.gpu;

/**
 * The network a {@link GpuModelTrainer} trains, with the parameter layout of the host models (Mlp,
 * SoftmaxRegression): one flat float array, tensors in this order, each row-major:
 * <ul>
 *   <li>softmax regression ({@code hidden == 0}): {@code W [inputs, classes]}, {@code b [classes]};</li>
 *   <li>MLP: {@code W1 [inputs, hidden]}, {@code b1 [hidden]}, {@code W2 [hidden, classes]},
 *       {@code b2 [classes]}, with {@code p = softmax(tanh(x W1 + b1) W2 + b2)}.</li>
 * </ul>
 * Both are trained on the summed softmax cross-entropy.
 */
public record GpuNetwork(int inputs, int hidden, int classes) {
    public GpuNetwork {
        if (inputs < 1 || hidden < 0 || classes < 2) {
            throw new IllegalArgumentException("a network needs inputs >= 1, hidden >= 0 (0: softmax regression) and"
                    + " classes >= 2; got " + inputs + ", " + hidden + ", " + classes);
        }
    }

    public static GpuNetwork softmaxRegression(int inputs, int classes) {
        return new GpuNetwork(inputs, 0, classes);
    }

    public static GpuNetwork mlp(int inputs, int hidden, int classes) {
        if (hidden < 1) {
            throw new IllegalArgumentException("an MLP needs hidden >= 1, got " + hidden);
        }
        return new GpuNetwork(inputs, hidden, classes);
    }

    public boolean hasHiddenLayer() {
        return hidden > 0;
    }

    /** Where W1 starts (MLP only). */
    public int hiddenWeightsAt() {
        return 0;
    }

    /** Where b1 starts (MLP only). */
    public int hiddenBiasAt() {
        return inputs * hidden;
    }

    /** Width of the output layer's input: hidden units, or the features for softmax regression. */
    public int outputInputs() {
        return hasHiddenLayer() ? hidden : inputs;
    }

    /** Where the output layer's weights (W2, or W) start. */
    public int outputWeightsAt() {
        return hasHiddenLayer() ? inputs * hidden + hidden : 0;
    }

    /** Where the output layer's bias (b2, or b) starts. */
    public int outputBiasAt() {
        return outputWeightsAt() + outputInputs() * classes;
    }

    public int parameterCount() {
        return outputBiasAt() + classes;
    }

    @Override
    public String toString() {
        return hasHiddenLayer() ? "mlp(" + inputs + "-" + hidden + "-" + classes + ")"
                : "softmax(" + inputs + "-" + classes + ")";
    }
}
