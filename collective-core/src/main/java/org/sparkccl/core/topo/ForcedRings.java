package org.sparkccl.core.topo;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Ring orders the user forces with {@code SPARKCCL_RINGS}, in NCCL's {@code NCCL_RINGS} syntax: rings
 * separated by {@code |}, ranks within a ring by spaces or {@code -} ({@code 0 1 3 2|0 2 3 1}). The text
 * is checked when the rings are asked for, against the communicator's rank count, which only then is
 * known; every error names the ring at fault.
 */
public final class ForcedRings {
    private final String text;
    private final List<int[]> orders;

    private ForcedRings(String text, List<int[]> orders) {
        this.text = text;
        this.orders = orders;
    }

    /** Parses the text; blank text forces nothing. */
    public static ForcedRings parse(String text) {
        List<int[]> orders = new ArrayList<>();
        if (text == null || text.isBlank()) {
            return new ForcedRings("", orders);
        }
        String[] rings = text.split("\\|", -1);
        for (int i = 0; i < rings.length; i++) {
            String ring = rings[i].trim();
            if (ring.isEmpty()) {
                throw error(text, i, rings[i], "is empty (rings are separated by |, e.g. '0 1 3 2|0 2 3 1')");
            }
            String[] ranks = ring.split("[\\s-]+");
            int[] order = new int[ranks.length];
            for (int k = 0; k < ranks.length; k++) {
                try {
                    order[k] = Integer.parseInt(ranks[k]);
                } catch (NumberFormatException e) {
                    throw error(text, i, ring, "has '" + ranks[k] + "', which is not a rank number");
                }
            }
            orders.add(order);
        }
        return new ForcedRings(text, orders);
    }

    public boolean isEmpty() {
        return orders.isEmpty();
    }

    /** How many rings the text gives. */
    public int count() {
        return orders.size();
    }

    /** The rings, each checked to hold every rank {@code 0..ranks-1} exactly once. */
    public List<Ring> rings(int ranks) {
        List<Ring> out = new ArrayList<>();
        for (int i = 0; i < orders.size(); i++) {
            int[] order = orders.get(i);
            String ring = joined(order);
            int[] seen = new int[ranks];
            for (int r : order) {
                if (r < 0 || r >= ranks) {
                    throw error(text, i, ring, "names rank " + r + ", but the communicator has ranks 0.." + (ranks - 1));
                }
                if (++seen[r] > 1) {
                    throw error(text, i, ring, "names rank " + r + " twice");
                }
            }
            List<Integer> missing = new ArrayList<>();
            for (int r = 0; r < ranks; r++) {
                if (seen[r] == 0) {
                    missing.add(r);
                }
            }
            if (!missing.isEmpty()) {
                throw error(text, i, ring, "leaves out rank" + (missing.size() == 1 ? " " : "s ") + missing
                        .toString().replaceAll("[\\[\\]]", ""));
            }
            out.add(new Ring(order));
        }
        return out;
    }

    private static String joined(int[] order) {
        return Arrays.toString(order).replaceAll("[\\[\\],]", "");
    }

    private static IllegalArgumentException error(String text, int index, String ring, String what) {
        return new IllegalArgumentException("SPARKCCL_RINGS='" + text + "': ring " + index + " ('" + ring.trim() + "') "
                + what + "; each ring must name every rank of the communicator once, rings separated by |."
                + " Fix the setting or unset it to let sparkccl search the rings");
    }
}
