package org.sparkccl.train;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.agrona.CloseHelper;
import org.sparkccl.arrow.Checkpoint;
import org.sparkccl.arrow.GradientBuffer;

/**
 * An optimizer's per-parameter state: named slots ({@code momentum}; Adam's {@code m} and {@code v}),
 * each a {@link GradientBuffer} with the model's layout and named after its slot, as
 * {@link Checkpoint} saves and restores them with the weights. Closing it closes every slot.
 */
final class OptimizerState implements AutoCloseable {
    private final Map<String, GradientBuffer> slots;

    private OptimizerState(Map<String, GradientBuffer> slots) {
        this.slots = slots;
    }

    /** Zero-filled slots shaped like {@code like} (same layout, type, allocator and memory source). */
    static OptimizerState like(GradientBuffer like, String... slotNames) {
        Map<String, GradientBuffer> slots = new LinkedHashMap<>();
        try {
            for (String name : slotNames) {
                if (slots.containsKey(name)) {
                    throw new IllegalArgumentException("optimizer slot '" + name + "' named twice");
                }
                slots.put(name, like.allocateLike(name));
            }
        } catch (RuntimeException | Error e) {
            CloseHelper.closeAll(slots.values());
            throw e;
        }
        return new OptimizerState(slots);
    }

    GradientBuffer slot(String name) {
        GradientBuffer b = slots.get(name);
        if (b == null) {
            throw new IllegalArgumentException("no optimizer slot '" + name + "'; there are " + slots.keySet());
        }
        return b;
    }

    /** The slots in the order they were created, as {@link Checkpoint} takes them. */
    List<GradientBuffer> slots() {
        return List.copyOf(slots.values());
    }

    /** Closes every slot; all are attempted, the first failure is thrown with the rest suppressed. */
    @Override
    public void close() {
        CloseHelper.closeAll(slots.values());
    }

    @Override
    public String toString() {
        return "OptimizerState" + slots.keySet();
    }
}
