package org.sparkccl.arrow;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;

/**
 * A model's named parameter tensors, laid end to end in one flat buffer in the order they were
 * added, with no padding (one all-reduce covers them all). Recorded in Arrow field metadata as:
 *
 * <pre>
 *   sparkccl.layout_version = 1
 *   sparkccl.tensor_count   = N
 *   sparkccl.tensor.i.name  = fc1.weight
 *   sparkccl.tensor.i.shape = 128,784        (empty for a scalar)
 *   sparkccl.tensor.i.offset = 0             (elements from the start of the buffer)
 * </pre>
 *
 * One key per value keeps names free of any escaping rules.
 */
public final class TensorLayout {
    public static final String KEY_VERSION = "sparkccl.layout_version";
    public static final String KEY_COUNT = "sparkccl.tensor_count";
    public static final String KEY_PREFIX = "sparkccl.tensor.";
    private static final String VERSION = "1";

    private final List<TensorInfo> tensors;
    private final Map<String, TensorInfo> byName;
    private final long elementCount;

    private TensorLayout(List<TensorInfo> tensors) {
        this.tensors = Collections.unmodifiableList(new ArrayList<>(tensors));
        this.byName = new LinkedHashMap<>();
        long end = 0;
        for (TensorInfo t : tensors) {
            if (byName.put(t.name(), t) != null) {
                throw new IllegalArgumentException("tensor name '" + t.name() + "' appears twice in the layout");
            }
            if (t.offset() != end) {
                throw new IllegalArgumentException("tensor '" + t.name() + "' starts at element " + t.offset()
                        + ", expected " + end + ": tensors must be laid end to end in order");
            }
            end = Math.addExact(end, t.elementCount());
        }
        if (end < 1 || end > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("a layout must hold 1 .. " + Integer.MAX_VALUE
                    + " elements (the limit of one Arrow vector); this one holds " + end);
        }
        this.elementCount = end;
    }

    public static Builder builder() {
        return new Builder();
    }

    /** A layout with one unnamed-shape tensor {@code name} of {@code count} elements. */
    public static TensorLayout flat(String name, long count) {
        return builder().add(name, count).build();
    }

    public List<TensorInfo> tensors() {
        return tensors;
    }

    public int tensorCount() {
        return tensors.size();
    }

    public TensorInfo tensor(int index) {
        return tensors.get(index);
    }

    public TensorInfo tensor(String name) {
        TensorInfo t = byName.get(name);
        if (t == null) {
            throw new IllegalArgumentException("no tensor named '" + name + "'; the layout has " + byName.keySet());
        }
        return t;
    }

    public boolean contains(String name) {
        return byName.containsKey(name);
    }

    /** Total elements of all tensors. */
    public long elementCount() {
        return elementCount;
    }

    /** This layout as field metadata (see the class comment). */
    public Map<String, String> toMetadata() {
        Map<String, String> m = new LinkedHashMap<>();
        m.put(KEY_VERSION, VERSION);
        m.put(KEY_COUNT, Integer.toString(tensors.size()));
        for (int i = 0; i < tensors.size(); i++) {
            TensorInfo t = tensors.get(i);
            m.put(KEY_PREFIX + i + ".name", t.name());
            m.put(KEY_PREFIX + i + ".shape", Arrays.stream(t.shape()).mapToObj(Long::toString)
                    .collect(Collectors.joining(",")));
            m.put(KEY_PREFIX + i + ".offset", Long.toString(t.offset()));
        }
        return m;
    }

    /** Reads a layout back from field metadata written by {@link #toMetadata()}. */
    public static TensorLayout fromMetadata(Map<String, String> metadata) {
        if (metadata == null || !metadata.containsKey(KEY_COUNT)) {
            throw new IllegalArgumentException("the field carries no sparkccl tensor layout (no " + KEY_COUNT
                    + " in its metadata); was it written by GradientBuffer?");
        }
        String version = metadata.get(KEY_VERSION);
        if (!VERSION.equals(version)) {
            throw new IllegalArgumentException("tensor layout version " + version + " is not supported (this is "
                    + VERSION + "); read it with the sparkccl version that wrote it");
        }
        int n = Integer.parseInt(metadata.get(KEY_COUNT));
        List<TensorInfo> list = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            String name = required(metadata, KEY_PREFIX + i + ".name");
            String shapeText = required(metadata, KEY_PREFIX + i + ".shape");
            long[] shape = shapeText.isEmpty() ? new long[0]
                    : Arrays.stream(shapeText.split(",")).mapToLong(Long::parseLong).toArray();
            long offset = Long.parseLong(required(metadata, KEY_PREFIX + i + ".offset"));
            list.add(new TensorInfo(name, shape, offset));
        }
        return new TensorLayout(list);
    }

    private static String required(Map<String, String> metadata, String key) {
        String v = metadata.get(key);
        if (v == null) {
            throw new IllegalArgumentException("tensor layout metadata lacks " + key);
        }
        return v;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof TensorLayout && tensors.equals(((TensorLayout) o).tensors);
    }

    @Override
    public int hashCode() {
        return tensors.hashCode();
    }

    @Override
    public String toString() {
        return tensors.size() + " tensors, " + elementCount + " elements " + tensors;
    }

    /** Adds tensors in order; each starts where the previous one ends. */
    public static final class Builder {
        private final List<TensorInfo> tensors = new ArrayList<>();
        private long next;

        public Builder add(String name, long... shape) {
            TensorInfo t = new TensorInfo(name, shape, next);
            tensors.add(t);
            next = Math.addExact(next, t.elementCount());
            return this;
        }

        public TensorLayout build() {
            return new TensorLayout(tensors);
        }
    }
}
