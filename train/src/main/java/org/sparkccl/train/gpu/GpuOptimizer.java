package org.sparkccl.train.gpu;

/**
 * The update a {@link GpuModelTrainer} applies to the mean gradient, with its state slots in the
 * order the host optimizers (MomentumSgd, Adam) keep them: momentum SGD {@code {momentum}}, Adam {@code {m, v}}.
 * Rounds as those do: momentum SGD in float (learning rate and momentum rounded to float first),
 * Adam's arithmetic in double with float moments.
 */
public record GpuOptimizer(Kind kind, double learningRate, double momentum, double beta1, double beta2,
                           double epsilon) {
    /** The updates the kernels implement. */
    public enum Kind {
        /** {@code v = mu v + g; w -= lr v}. */
        MOMENTUM_SGD,
        /** Adam (Kingma and Ba) with bias correction. */
        ADAM
    }

    public GpuOptimizer {
        if (!(learningRate > 0)) {
            throw new IllegalArgumentException("learning rate must be > 0, got " + learningRate);
        }
    }

    public static GpuOptimizer momentumSgd(double learningRate, double momentum) {
        return new GpuOptimizer(Kind.MOMENTUM_SGD, learningRate, momentum, 0, 0, 0);
    }

    public static GpuOptimizer adam(double learningRate, double beta1, double beta2, double epsilon) {
        return new GpuOptimizer(Kind.ADAM, learningRate, 0, beta1, beta2, epsilon);
    }

    /** State arrays of the weights' shape: 1 for momentum SGD, 2 for Adam. */
    public int slotCount() {
        return kind == Kind.ADAM ? 2 : 1;
    }
}
