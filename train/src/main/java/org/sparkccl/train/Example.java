package org.sparkccl.train;

import java.io.Serializable;

/** One training example with its global id (0 .. n-1), which decides its rank and its batches. */
public final class Example implements Serializable {
    private static final long serialVersionUID = 1L;

    final long id;
    final float[] features;
    final float label;

    public Example(long id, float[] features, float label) {
        this.id = id;
        this.features = features;
        this.label = label;
    }

    public long id() {
        return id;
    }

    public float[] features() {
        return features;
    }

    public float label() {
        return label;
    }
}
