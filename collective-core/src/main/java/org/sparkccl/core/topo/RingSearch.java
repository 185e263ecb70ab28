package org.sparkccl.core.topo;

import java.util.ArrayList;
import java.util.List;

/**
 * Chooses ring orders. The best ring maximizes its {@link RingScore}: the slowest hop, then the sum,
 * then closeness. Up to {@link #EXACT_LIMIT} ranks the search is exact (every order with rank 0 first,
 * branch and bound, and for symmetric costs only one of each ring and its reverse); above, a greedy
 * ring improved by 2-opt and single moves until neither helps. Among equal rings the search keeps the
 * lexicographically smallest order it meets, so the same costs give the same ring on every rank.
 */
public final class RingSearch {
    /** Ranks up to which the search tries every ring (9!/2 orders at 10). */
    public static final int EXACT_LIMIT = 10;

    private RingSearch() {
    }

    /** How the channels after the first are chosen. */
    public enum ChannelMode {
        /** Every channel runs the best ring. */
        SAME,
        /**
         * Each channel is the best ring over what the earlier ones left: a hop already used by k
         * channels in that direction counts with 1/(k+1) of its bandwidth, so later channels take
         * other links where there are some (the reverse direction of full-duplex links, other NVLinks).
         */
        SPREAD
    }

    public static Ring best(HopCosts costs) {
        return costs.size() <= EXACT_LIMIT ? exact(costs) : heuristic(costs);
    }

    /** {@code count} rings, one per channel. */
    public static List<Ring> channels(HopCosts costs, int count, ChannelMode mode) {
        if (count < 1) {
            throw new IllegalArgumentException("need at least one channel, got " + count);
        }
        List<Ring> out = new ArrayList<>();
        int n = costs.size();
        int[][] uses = new int[n][n];
        for (int c = 0; c < count; c++) {
            if (mode == ChannelMode.SAME && c > 0) {
                out.add(out.get(0));
                continue;
            }
            long[][] left = new long[n][n];
            for (int i = 0; i < n; i++) {
                for (int j = 0; j < n; j++) {
                    left[i][j] = costs.bandwidth(i, j) / (uses[i][j] + 1);
                }
            }
            Ring ring = best(costs.withBandwidths(left));
            for (int i = 0; i < n; i++) {
                uses[ring.rankAt(i)][ring.rankAt((i + 1) % n)]++;
            }
            out.add(ring);
        }
        return out;
    }

    /** Tries every ring with rank 0 first. */
    public static Ring exact(HopCosts costs) {
        int n = costs.size();
        if (n > 12) {
            throw new IllegalArgumentException("exact ring search over " + n + " ranks would try " + (n - 1)
                    + "! orders; use best() or heuristic()");
        }
        if (n <= 2) {
            int[] order = new int[n];
            for (int i = 0; i < n; i++) {
                order[i] = i;
            }
            return new Ring(order);
        }
        Exact search = new Exact(costs);
        search.run();
        return new Ring(search.bestOrder);
    }

    private static final class Exact {
        private final HopCosts c;
        private final int n;
        private final long maxBw;
        private final int[] order;
        private final boolean[] used;
        private int[] bestOrder;
        private RingScore best;

        Exact(HopCosts c) {
            this.c = c;
            this.n = c.size();
            long m = 0;
            for (int i = 0; i < n; i++) {
                for (int j = 0; j < n; j++) {
                    m = i == j ? m : Math.max(m, c.bandwidth(i, j));
                }
            }
            this.maxBw = m;
            this.order = new int[n];
            this.used = new boolean[n];
        }

        void run() {
            order[0] = 0;
            used[0] = true;
            extend(1, Long.MAX_VALUE, 0);
        }

        /** Places position {@code pos}; {@code min} and {@code sum} cover the hops placed so far. */
        private void extend(int pos, long min, long sum) {
            if (pos == n) {
                // For symmetric costs a ring and its reverse score alike: keep the one whose second rank is smaller.
                if (c.symmetric() && order[1] > order[n - 1]) {
                    return;
                }
                RingScore s = RingScore.of(c, order);
                if (best == null || s.betterThan(best)) {
                    best = s;
                    bestOrder = order.clone();
                }
                return;
            }
            int prev = order[pos - 1];
            for (int r = 1; r < n; r++) {
                if (used[r]) {
                    continue;
                }
                long bw = c.bandwidth(prev, r);
                long m = Math.min(min, bw);
                long s = sum + bw;
                if (best != null) {
                    if (m < best.slowestMBps()) {
                        continue; // the slowest hop can only get slower
                    }
                    // n - pos hops are still to come, the closing one included.
                    if (m == best.slowestMBps() && s + (n - pos) * maxBw < best.sumMBps()) {
                        continue;
                    }
                }
                order[pos] = r;
                used[r] = true;
                extend(pos + 1, m, s);
                used[r] = false;
            }
        }
    }

    /** A greedy ring from rank 0 (fastest next hop, then closest, then lowest rank), then local search. */
    public static Ring heuristic(HopCosts c) {
        int n = c.size();
        int[] order = new int[n];
        boolean[] used = new boolean[n];
        used[0] = true;
        for (int pos = 1; pos < n; pos++) {
            int prev = order[pos - 1];
            int pick = -1;
            for (int r = 1; r < n; r++) {
                if (!used[r] && (pick < 0 || c.bandwidth(prev, r) > c.bandwidth(prev, pick)
                        || (c.bandwidth(prev, r) == c.bandwidth(prev, pick) && c.closeness(prev, r) < c.closeness(prev, pick)))) {
                    pick = r;
                }
            }
            order[pos] = pick;
            used[pick] = true;
        }
        RingScore score = RingScore.of(c, order);
        boolean improved = true;
        while (improved) {
            improved = false;
            // 2-opt: reverse order[i..j] (rank 0 stays first).
            for (int i = 1; i < n - 1 && !improved; i++) {
                for (int j = i + 1; j < n && !improved; j++) {
                    int[] cand = order.clone();
                    for (int a = i, b = j; a < b; a++, b--) {
                        int t = cand[a];
                        cand[a] = cand[b];
                        cand[b] = t;
                    }
                    RingScore s = RingScore.of(c, cand);
                    if (s.betterThan(score)) {
                        order = cand;
                        score = s;
                        improved = true;
                    }
                }
            }
            // Move one rank to another place.
            for (int i = 1; i < n && !improved; i++) {
                for (int j = 1; j < n && !improved; j++) {
                    if (i == j) {
                        continue;
                    }
                    int[] cand = move(order, i, j);
                    RingScore s = RingScore.of(c, cand);
                    if (s.betterThan(score)) {
                        order = cand;
                        score = s;
                        improved = true;
                    }
                }
            }
        }
        if (c.symmetric() && n > 2 && order[1] > order[n - 1]) {
            return new Ring(order).reversed();
        }
        return new Ring(order);
    }

    private static int[] move(int[] order, int from, int to) {
        List<Integer> l = new ArrayList<>();
        for (int r : order) {
            l.add(r);
        }
        int r = l.remove(from);
        l.add(to, r);
        int[] out = new int[order.length];
        for (int i = 0; i < out.length; i++) {
            out[i] = l.get(i);
        }
        return out;
    }
}
