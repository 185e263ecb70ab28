package org.sparkccl.train;

import java.io.Serializable;

/**
 * What the driver learns about the data in one pass before training: row count, feature count,
 * class count, and each feature's largest magnitude (features are divided by it, so that every
 * input lies in [-1, 1] and one learning rate suits them all). Accumulates in place, as Spark's
 * aggregate lets it (each partition starts from its own copy of the zero value).
 */
public final class DataStats implements Serializable {
    private static final long serialVersionUID = 1L;

    private long rows;
    private int cols = -1;
    private int classes;
    private float[] maxAbs = new float[0];

    static DataStats of(Iterable<Example> examples) {
        DataStats s = new DataStats();
        for (Example e : examples) {
            s.add(e);
        }
        return s;
    }

    DataStats add(Example e) {
        return add(e.features, 0, e.features.length, e.label, "example ", e.id);
    }

    /**
     * The row of {@code width} features at {@code x[at ..]} with label {@code label}; errors name it
     * as {@code what + index} (built only then: this runs once per row).
     */
    DataStats add(float[] x, int at, int width, float label, String what, long index) {
        if (cols >= 0 && width != cols) {
            throw new IllegalArgumentException(what + index + " has " + width + " features, earlier ones " + cols
                    + ": every row needs the same number");
        }
        if (label < 0 || label != Math.rint(label)) {
            throw new IllegalArgumentException(what + index + " has label " + label
                    + "; labels must be class indices 0, 1, 2, ...");
        }
        if (cols < 0) {
            cols = width;
            maxAbs = new float[cols];
        }
        for (int i = 0; i < cols; i++) {
            maxAbs[i] = Math.max(maxAbs[i], Math.abs(x[at + i]));
        }
        rows++;
        classes = Math.max(classes, (int) label + 1);
        return this;
    }

    DataStats merge(DataStats o) {
        if (o.rows == 0) {
            return this;
        }
        if (rows == 0) {
            return o;
        }
        if (o.cols != cols) {
            throw new IllegalArgumentException("rows have " + cols + " and " + o.cols + " features: every row needs the same number");
        }
        for (int i = 0; i < cols; i++) {
            maxAbs[i] = Math.max(maxAbs[i], o.maxAbs[i]);
        }
        rows += o.rows;
        classes = Math.max(classes, o.classes);
        return this;
    }

    public long rows() {
        return rows;
    }

    public int cols() {
        return cols;
    }

    public int classes() {
        return classes;
    }

    /** Each feature's largest magnitude over the data (what {@link #scale} divides by; 0 leaves a feature alone). */
    public float[] featureMaxAbs() {
        return maxAbs.clone();
    }

    /** Feature i divided by its largest magnitude (left alone where that is 0). */
    float scale(int i, float value) {
        return maxAbs[i] == 0 ? value : value / maxAbs[i];
    }
}
