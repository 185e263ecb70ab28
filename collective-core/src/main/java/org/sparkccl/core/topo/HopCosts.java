package org.sparkccl.core.topo;

import java.util.Arrays;

/**
 * What ring search weighs for each ordered pair of ranks: the bandwidth of sending from one to the
 * other, in whole MB/s (integers, so that sums compare exactly and every rank reaches the same
 * answer), and how close the two are (a {@link PathKind} ordinal; lower is closer), which breaks ties.
 */
public final class HopCosts {
    /** Bandwidths are capped here so that sums over a ring cannot overflow. */
    public static final long MAX_MBPS = 1_000_000_000L;

    private final long[][] bandwidthMBps;
    private final int[][] closeness;
    private final boolean symmetric;

    public HopCosts(long[][] bandwidthMBps, int[][] closeness) {
        int n = bandwidthMBps.length;
        if (n == 0 || closeness.length != n) {
            throw new IllegalArgumentException("hop costs need a square matrix of at least one rank, and closeness of the same size");
        }
        this.bandwidthMBps = new long[n][];
        this.closeness = new int[n][];
        for (int i = 0; i < n; i++) {
            if (bandwidthMBps[i].length != n || closeness[i].length != n) {
                throw new IllegalArgumentException("row " + i + " of the hop costs is not " + n + " long");
            }
            this.bandwidthMBps[i] = bandwidthMBps[i].clone();
            this.closeness[i] = closeness[i].clone();
            for (int j = 0; j < n; j++) {
                if (bandwidthMBps[i][j] < 0 || bandwidthMBps[i][j] > MAX_MBPS) {
                    throw new IllegalArgumentException("bandwidth " + i + " -> " + j + " is " + bandwidthMBps[i][j]
                            + " MB/s; expected 0 to " + MAX_MBPS);
                }
            }
        }
        boolean sym = true;
        for (int i = 0; i < n && sym; i++) {
            for (int j = 0; j < n && sym; j++) {
                sym = bandwidthMBps[i][j] == bandwidthMBps[j][i] && closeness[i][j] == closeness[j][i];
            }
        }
        this.symmetric = sym;
    }

    /** Every hop alike: ring search then keeps ranks in order. */
    public static HopCosts uniform(int n) {
        long[][] bw = new long[n][n];
        int[][] close = new int[n][n];
        for (long[] row : bw) {
            Arrays.fill(row, 1);
        }
        return new HopCosts(bw, close);
    }

    /** GB/s to the whole MB/s that hop costs count in, capped at {@link #MAX_MBPS}. */
    public static long toMBps(double gbps) {
        return gbps >= MAX_MBPS / 1000.0 ? MAX_MBPS : Math.max(0, Math.round(gbps * 1000.0));
    }

    public int size() {
        return bandwidthMBps.length;
    }

    public long bandwidth(int from, int to) {
        return bandwidthMBps[from][to];
    }

    public int closeness(int from, int to) {
        return closeness[from][to];
    }

    /** True when every hop costs the same both ways: a ring and its reverse then score alike. */
    public boolean symmetric() {
        return symmetric;
    }

    /** A copy with new bandwidths and the same closeness. */
    HopCosts withBandwidths(long[][] bw) {
        return new HopCosts(bw, closeness);
    }
}
