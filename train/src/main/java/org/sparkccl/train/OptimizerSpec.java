package org.sparkccl.train;

import java.io.Serializable;
import java.util.Locale;

/** Which optimizer and its hyperparameters; serializable so that every rank builds the same one. */
public final class OptimizerSpec implements Serializable {
    private static final long serialVersionUID = 1L;
    /** Adam's moment decay rates and epsilon (the paper's defaults), on the CPU and the GPU alike. */
    public static final double ADAM_BETA1 = 0.9;
    public static final double ADAM_BETA2 = 0.999;
    public static final double ADAM_EPSILON = 1e-8;

    /** The optimizers TrainJob offers. */
    public enum Kind {
        SGD, ADAM;

        public static Kind parse(String text) {
            try {
                return valueOf(text.trim().toUpperCase(Locale.ROOT));
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException("unknown optimizer '" + text + "': use sgd (with momentum) or adam");
            }
        }
    }

    private final Kind kind;
    private final double learningRate;
    private final double momentum;

    public OptimizerSpec(Kind kind, double learningRate, double momentum) {
        if (!(learningRate > 0)) {
            throw new IllegalArgumentException("learning rate must be > 0, got " + learningRate);
        }
        this.kind = kind;
        this.learningRate = learningRate;
        this.momentum = momentum;
    }

    public Optimizer create() {
        return kind == Kind.ADAM ? new Adam(learningRate, ADAM_BETA1, ADAM_BETA2, ADAM_EPSILON) : new MomentumSgd(learningRate, momentum);
    }

    public Kind kind() {
        return kind;
    }

    public double learningRate() {
        return learningRate;
    }

    /** SGD's momentum (Adam ignores it). */
    public double momentum() {
        return momentum;
    }

    @Override
    public String toString() {
        return kind == Kind.ADAM ? String.format(Locale.ROOT, "adam(lr=%g)", learningRate)
                : String.format(Locale.ROOT, "sgd(lr=%g, momentum=%g)", learningRate, momentum);
    }
}
