package org.sparkccl.core.topo;

import java.util.Arrays;

/** A ring order of ranks: {@code order[i]} sends to {@code order[i + 1]}, the last to the first. */
public final class Ring {
    private final int[] order;
    private final int[] position;

    public Ring(int[] order) {
        this.order = order.clone();
        this.position = new int[order.length];
        Arrays.fill(position, -1);
        for (int i = 0; i < order.length; i++) {
            int r = order[i];
            if (r < 0 || r >= order.length || position[r] >= 0) {
                throw new IllegalArgumentException("a ring must hold each rank 0.." + (order.length - 1) + " once: "
                        + Arrays.toString(order));
            }
            position[r] = i;
        }
    }

    public int size() {
        return order.length;
    }

    public int[] order() {
        return order.clone();
    }

    public int rankAt(int index) {
        return order[index];
    }

    /** Where a rank stands in the ring. */
    public int positionOf(int rank) {
        return position[rank];
    }

    /** The rank that {@code rank} sends to. */
    public int next(int rank) {
        return order[(position[rank] + 1) % order.length];
    }

    /** The rank that {@code rank} receives from. */
    public int prev(int rank) {
        return order[(position[rank] + order.length - 1) % order.length];
    }

    /** The same ring run the other way round, still from the same first rank. */
    public Ring reversed() {
        int n = order.length;
        int[] r = new int[n];
        r[0] = order[0];
        for (int i = 1; i < n; i++) {
            r[i] = order[n - i];
        }
        return new Ring(r);
    }

    /** {@code 0 -> 1 -> 3 -> 2 -> 0}. */
    @Override
    public String toString() {
        StringBuilder b = new StringBuilder();
        for (int r : order) {
            b.append(r).append(" -> ");
        }
        return b.append(order[0]).toString();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Ring && Arrays.equals(order, ((Ring) o).order);
    }

    @Override
    public int hashCode() {
        return Arrays.hashCode(order);
    }
}
