package org.sparkccl.arrow;

import java.util.Arrays;
import java.util.Objects;

/** One named tensor of a {@link TensorLayout}: its shape and where its elements start in the flat buffer. */
public final class TensorInfo {
    private final String name;
    private final long[] shape;
    private final long offset;
    private final long elementCount;

    TensorInfo(String name, long[] shape, long offset) {
        this.name = Objects.requireNonNull(name, "name");
        this.shape = shape.clone();
        this.offset = offset;
        this.elementCount = elementCount(name, this.shape);
    }

    static long elementCount(String name, long[] shape) {
        long count = 1;
        for (long d : shape) {
            if (d < 0) {
                throw new IllegalArgumentException("tensor '" + name + "' has a negative dimension: "
                        + Arrays.toString(shape));
            }
            count = Math.multiplyExact(count, d);
        }
        return count;
    }

    public String name() {
        return name;
    }

    /** A copy of the shape; a scalar has shape {@code []}. */
    public long[] shape() {
        return shape.clone();
    }

    public int rank() {
        return shape.length;
    }

    public long dim(int i) {
        return shape[i];
    }

    /** Index of the first element in the flat buffer (elements, not bytes). */
    public long offset() {
        return offset;
    }

    public long elementCount() {
        return elementCount;
    }

    @Override
    public boolean equals(Object o) {
        if (!(o instanceof TensorInfo)) {
            return false;
        }
        TensorInfo t = (TensorInfo) o;
        return name.equals(t.name) && Arrays.equals(shape, t.shape) && offset == t.offset;
    }

    @Override
    public int hashCode() {
        return Objects.hash(name, Arrays.hashCode(shape), offset);
    }

    @Override
    public String toString() {
        return name + Arrays.toString(shape) + "@" + offset;
    }
}
