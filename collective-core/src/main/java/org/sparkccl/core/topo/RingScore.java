package org.sparkccl.core.topo;

/**
 * How good a ring is, compared in this order: the slowest hop's bandwidth (higher is better), then
 * the sum of all hops' bandwidths (higher), then the sum of the hops' closeness (lower: a ring
 * through one PCIe switch beats one through the host bridge at the same link speed).
 */
public record RingScore(long slowestMBps, long sumMBps, long closeness) implements Comparable<RingScore> {

    public static RingScore of(HopCosts c, int[] order) {
        int n = order.length;
        long min = Long.MAX_VALUE;
        long sum = 0;
        long close = 0;
        for (int i = 0; i < n; i++) {
            int a = order[i];
            int b = order[(i + 1) % n];
            long bw = c.bandwidth(a, b);
            min = Math.min(min, bw);
            sum += bw;
            close += c.closeness(a, b);
        }
        return new RingScore(min, sum, close);
    }

    /** Positive when this ring is better than {@code o}. */
    @Override
    public int compareTo(RingScore o) {
        if (slowestMBps != o.slowestMBps) {
            return Long.compare(slowestMBps, o.slowestMBps);
        }
        if (sumMBps != o.sumMBps) {
            return Long.compare(sumMBps, o.sumMBps);
        }
        return Long.compare(o.closeness, closeness);
    }

    public boolean betterThan(RingScore o) {
        return compareTo(o) > 0;
    }
}
