package org.sparkccl.train;

import java.io.Serializable;
import java.util.Locale;

/** Which model, and its sizes: enough to build the same one on every rank and to check a checkpoint. */
public final class ModelSpec implements Serializable {
    private static final long serialVersionUID = 1L;

    /** The models TrainJob offers. */
    public enum Kind {
        SOFTMAX, MLP;

        public static Kind parse(String text) {
            try {
                return valueOf(text.trim().toUpperCase(Locale.ROOT));
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException("unknown model '" + text + "': use softmax or mlp");
            }
        }
    }

    private final Kind kind;
    private final int inputs;
    private final int hidden;
    private final int classes;

    public ModelSpec(Kind kind, int inputs, int hidden, int classes) {
        if (inputs < 1 || classes < 2 || (kind == Kind.MLP && hidden < 1)) {
            throw new IllegalArgumentException("a " + kind + " model needs inputs >= 1, classes >= 2"
                    + (kind == Kind.MLP ? " and hidden >= 1" : "") + "; got " + inputs + ", " + classes
                    + (kind == Kind.MLP ? ", " + hidden : ""));
        }
        this.kind = kind;
        this.inputs = inputs;
        this.hidden = kind == Kind.MLP ? hidden : 0;
        this.classes = classes;
    }

    public Model create() {
        return kind == Kind.MLP ? new Mlp(inputs, hidden, classes) : new SoftmaxRegression(inputs, classes);
    }

    public Kind kind() {
        return kind;
    }

    public int inputs() {
        return inputs;
    }

    public int classes() {
        return classes;
    }

    /** Hidden units of the MLP; 0 for softmax regression. */
    public int hidden() {
        return hidden;
    }

    @Override
    public String toString() {
        return kind == Kind.MLP ? "mlp(" + inputs + "-" + hidden + "-" + classes + ")"
                : "softmax(" + inputs + "-" + classes + ")";
    }
}
