package org.sparkccl.train;

import java.io.Serializable;
import java.util.Arrays;
import java.util.Locale;
import java.util.stream.Collectors;

/** Which model, and its sizes: enough to build the same one on every rank and to check a checkpoint. */
public final class ModelSpec implements Serializable {
    private static final long serialVersionUID = 2L;

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
    private final int[] hidden;
    private final int classes;

    /** An MLP with one hidden layer of {@code hidden} units, or softmax regression (hidden is then ignored). */
    public ModelSpec(Kind kind, int inputs, int hidden, int classes) {
        this(kind, inputs, kind == Kind.MLP ? new int[] {hidden} : new int[0], classes);
    }

    /** {@code hidden}: the hidden layers' widths, first to last; at least one for an MLP, ignored for softmax. */
    public ModelSpec(Kind kind, int inputs, int[] hidden, int classes) {
        boolean badHidden = kind == Kind.MLP && (hidden.length == 0 || Arrays.stream(hidden).anyMatch(h -> h < 1));
        if (inputs < 1 || classes < 2 || badHidden) {
            throw new IllegalArgumentException("a " + kind + " model needs inputs >= 1, classes >= 2"
                    + (kind == Kind.MLP ? " and hidden layers of >= 1 unit each" : "") + "; got " + inputs + ", " + classes
                    + (kind == Kind.MLP ? ", " + Arrays.toString(hidden) : ""));
        }
        this.kind = kind;
        this.inputs = inputs;
        this.hidden = kind == Kind.MLP ? hidden.clone() : new int[0];
        this.classes = classes;
    }

    /** Softmax regression for no hidden layers, else an MLP with these. */
    public static ModelSpec of(int inputs, int[] hiddenLayers, int classes) {
        return new ModelSpec(hiddenLayers.length == 0 ? Kind.SOFTMAX : Kind.MLP, inputs, hiddenLayers, classes);
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

    /** Hidden units of the MLP's first hidden layer; 0 for softmax regression. */
    public int hidden() {
        return hidden.length == 0 ? 0 : hidden[0];
    }

    /** The hidden layers' widths, first to last; empty for softmax regression. */
    public int[] hiddenLayers() {
        return hidden.clone();
    }

    @Override
    public String toString() {
        return kind == Kind.MLP ? "mlp(" + inputs + "-" + Arrays.stream(hidden).mapToObj(Integer::toString)
                .collect(Collectors.joining("-")) + "-" + classes + ")"
                : "softmax(" + inputs + "-" + classes + ")";
    }
}
