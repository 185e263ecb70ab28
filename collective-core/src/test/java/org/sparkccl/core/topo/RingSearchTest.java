package org.sparkccl.core.topo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.Test;

class RingSearchTest {

    /** Every order with rank 0 first, in lexicographic order; the first strictly best is kept. */
    static Ring bruteForce(HopCosts c) {
        int n = c.size();
        List<int[]> all = new ArrayList<>();
        permutations(new int[n], new boolean[n], 1, all);
        int[] best = null;
        RingScore bestScore = null;
        for (int[] o : all) {
            RingScore s = RingScore.of(c, o);
            if (bestScore == null || s.betterThan(bestScore)) {
                best = o;
                bestScore = s;
            }
        }
        return new Ring(best);
    }

    private static void permutations(int[] order, boolean[] used, int pos, List<int[]> out) {
        if (pos == order.length) {
            out.add(order.clone());
            return;
        }
        for (int r = 1; r < order.length; r++) {
            if (!used[r]) {
                used[r] = true;
                order[pos] = r;
                permutations(order, used, pos + 1, out);
                used[r] = false;
            }
        }
    }

    static HopCosts random(Random rnd, int n, boolean symmetric, int levels) {
        long[][] bw = new long[n][n];
        int[][] close = new int[n][n];
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < n; j++) {
                if (i == j || (symmetric && j < i)) {
                    continue;
                }
                bw[i][j] = 1000L * (1 + rnd.nextInt(levels));
                close[i][j] = rnd.nextInt(3);
                if (symmetric) {
                    bw[j][i] = bw[i][j];
                    close[j][i] = close[i][j];
                }
            }
        }
        return new HopCosts(bw, close);
    }

    @Test
    void exactSearchMatchesBruteForceOnRandomCosts() {
        Random rnd = new Random(20240611L);
        for (int n = 3; n <= 8; n++) {
            for (int trial = 0; trial < 12; trial++) {
                // Few levels make many ties, which is where the tie-break has to agree too.
                HopCosts c = random(rnd, n, trial % 3 != 2, trial % 2 == 0 ? 3 : 1000);
                Ring expected = bruteForce(c);
                Ring found = RingSearch.exact(c);
                assertEquals(expected, found, "n=" + n + " trial " + trial);
                assertEquals(RingScore.of(c, expected.order()), RingScore.of(c, found.order()));
            }
        }
    }

    @Test
    void heuristicIsAValidRingAndNeverBeatsTheOptimum() {
        Random rnd = new Random(7);
        int optimal = 0;
        int trials = 0;
        for (int n = 3; n <= 8; n++) {
            for (int trial = 0; trial < 10; trial++) {
                HopCosts c = random(rnd, n, trial % 2 == 0, 4);
                RingScore best = RingScore.of(c, RingSearch.exact(c).order());
                RingScore h = RingScore.of(c, RingSearch.heuristic(c).order());
                assertFalse(h.betterThan(best), "n=" + n);
                optimal += h.equals(best) ? 1 : 0;
                trials++;
            }
        }
        // A local search misses sometimes, but not mostly.
        assertTrue(optimal * 10 >= trials * 7, optimal + " of " + trials + " optimal");
    }

    @Test
    void heuristicAboveTheExactLimitFindsTheTwoSocketStructure() {
        // 16 ranks, two sockets of 8 in scrambled rank order: 20 GB/s within a socket, 10 across.
        int n = 16;
        int[] socket = new int[n];
        Random rnd = new Random(3);
        List<Integer> ranks = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            ranks.add(i);
        }
        java.util.Collections.shuffle(ranks, rnd);
        for (int i = 0; i < n; i++) {
            socket[ranks.get(i)] = i < n / 2 ? 0 : 1;
        }
        long[][] bw = new long[n][n];
        int[][] close = new int[n][n];
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < n; j++) {
                bw[i][j] = socket[i] == socket[j] ? 20_000 : 10_000;
                close[i][j] = socket[i] == socket[j] ? PathKind.PXB.ordinal() : PathKind.SYS.ordinal();
            }
        }
        Ring r = RingSearch.best(new HopCosts(bw, close));
        int crossings = 0;
        for (int i = 0; i < n; i++) {
            crossings += socket[r.rankAt(i)] != socket[r.rankAt((i + 1) % n)] ? 1 : 0;
        }
        assertEquals(2, crossings, r.toString());
        assertEquals(0, r.rankAt(0));
        assertEquals(r, RingSearch.best(new HopCosts(bw, close)), "deterministic");
    }

    @Test
    void uniformCostsKeepRankOrder() {
        assertEquals("0 -> 1 -> 2 -> 3 -> 4 -> 0", RingSearch.best(HopCosts.uniform(5)).toString());
        assertEquals("0 -> 1 -> 2 -> 3 -> 4 -> 5 -> 6 -> 7 -> 8 -> 9 -> 10 -> 11 -> 0",
                RingSearch.best(HopCosts.uniform(12)).toString());
        assertEquals("0 -> 0", RingSearch.best(HopCosts.uniform(1)).toString());
    }

    @Test
    void spreadChannelsUseFreshLinksFirst() {
        List<Ring> rings = RingSearch.channels(HopCosts.uniform(4), 2, RingSearch.ChannelMode.SPREAD);
        Set<String> hops = new HashSet<>();
        for (Ring r : rings) {
            for (int i = 0; i < r.size(); i++) {
                assertTrue(hops.add(r.rankAt(i) + ">" + r.next(r.rankAt(i))), "hop used twice: " + rings);
            }
        }
        assertEquals(rings.get(0).reversed(), rings.get(1));
        List<Ring> same = RingSearch.channels(HopCosts.uniform(4), 3, RingSearch.ChannelMode.SAME);
        assertEquals(List.of(same.get(0), same.get(0), same.get(0)), same);
    }

    @Test
    void ringNeighbours() {
        Ring r = new Ring(new int[] {0, 2, 3, 1});
        assertEquals(3, r.next(2));
        assertEquals(0, r.next(1));
        assertEquals(1, r.prev(0));
        assertEquals(2, r.positionOf(3));
        assertEquals("Ring 01 : 0 -> 2 -> 3 -> 1 -> 0", RingPlanner.logLine(1, r));
    }
}
