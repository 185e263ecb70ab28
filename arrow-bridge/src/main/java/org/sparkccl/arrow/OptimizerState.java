package org.sparkccl.arrow;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * An optimizer's per-parameter state: named slots ({@code momentum}; Adam's {@code m} and {@code v}),
 * each a {@link GradientBuffer} with the model's layout. Saved and restored with the weights by
 * {@link Checkpoint}. Closing it closes every slot.
 */
public final class OptimizerState implements AutoCloseable {
    private final Map<String, GradientBuffer> slots;

    private OptimizerState(Map<String, GradientBuffer> slots) {
        this.slots = slots;
    }

    /** No slots: plain SGD. */
    public static OptimizerState empty() {
        return new OptimizerState(new LinkedHashMap<>());
    }

    /** Zero-filled slots shaped like {@code like} (same layout, type, allocator and memory source). */
    public static OptimizerState like(GradientBuffer like, String... slotNames) {
        Map<String, GradientBuffer> slots = new LinkedHashMap<>();
        try {
            for (String name : slotNames) {
                if (slots.containsKey(name)) {
                    throw new IllegalArgumentException("optimizer slot '" + name + "' named twice");
                }
                slots.put(name, like.allocateLike(name));
            }
        } catch (RuntimeException | Error e) {
            slots.values().forEach(GradientBuffer::close);
            throw e;
        }
        return new OptimizerState(slots);
    }

    /** Takes ownership of {@code buffers}; each slot is named after its buffer's {@link GradientBuffer#name()}. */
    public static OptimizerState of(List<GradientBuffer> buffers) {
        Map<String, GradientBuffer> slots = new LinkedHashMap<>();
        for (GradientBuffer b : buffers) {
            if (slots.put(b.name(), b) != null) {
                throw new IllegalArgumentException("optimizer slot '" + b.name() + "' appears twice");
            }
        }
        return new OptimizerState(slots);
    }

    public GradientBuffer slot(String name) {
        GradientBuffer b = slots.get(name);
        if (b == null) {
            throw new IllegalArgumentException("no optimizer slot '" + name + "'; there are " + slots.keySet());
        }
        return b;
    }

    public boolean hasSlot(String name) {
        return slots.containsKey(name);
    }

    /** Slot names in the order they were created. */
    public List<String> slotNames() {
        return Collections.unmodifiableList(new ArrayList<>(slots.keySet()));
    }

    public List<GradientBuffer> slots() {
        return Collections.unmodifiableList(new ArrayList<>(slots.values()));
    }

    public boolean isEmpty() {
        return slots.isEmpty();
    }

    /** Closes every slot; all are attempted, the first failure is thrown with the rest suppressed. */
    @Override
    public void close() {
        RuntimeException first = null;
        for (GradientBuffer b : slots.values()) {
            try {
                b.close();
            } catch (RuntimeException e) {
                if (first == null) {
                    first = e;
                } else {
                    first.addSuppressed(e);
                }
            }
        }
        if (first != null) {
            throw first;
        }
    }

    @Override
    public String toString() {
        return "OptimizerState" + slots.keySet();
    }
}
