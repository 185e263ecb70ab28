package org.sparkccl.core.topo;

import java.util.List;
import org.sparkccl.core.log.CclLog;
import org.sparkccl.core.log.Subsys;

/**
 * Rings for a set of ranks on one machine: each rank names its GPU's bus id (null for a rank
 * without a GPU), the topology says how each pair is connected, and {@link RingSearch} orders them.
 * Every rank that passes the same bus ids and topology gets the same rings.
 */
public final class RingPlanner {
    private RingPlanner() {
    }

    /**
     * Hop costs between ranks. A pair where either rank has no GPU, or a GPU the topology does not
     * know, counts as {@link PathKind#SYS} at the topology's SMP bandwidth: ranks without GPUs all
     * look alike, and ring search then keeps them in rank order.
     */
    public static HopCosts hopCosts(Topology t, List<String> busIdByRank) {
        int n = busIdByRank.size();
        long[][] bw = new long[n][n];
        int[][] close = new int[n][n];
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < n; j++) {
                TopoPath p = path(t, busIdByRank.get(i), busIdByRank.get(j));
                bw[i][j] = HopCosts.toMBps(p.bandwidthGBps());
                close[i][j] = p.kind().ordinal();
            }
        }
        return new HopCosts(bw, close);
    }

    /** The path between two ranks' GPUs, as {@link #hopCosts} counts it. */
    public static TopoPath path(Topology t, String busIdA, String busIdB) {
        if (busIdA == null || busIdB == null || t.device(busIdA) == null || t.device(busIdB) == null) {
            return new TopoPath(PathKind.SYS, t.smpGBps(), 0);
        }
        TopoPath p = t.path(busIdA, busIdB);
        // A path without link information (some virtual machines) still needs a number; the SMP figure
        // keeps such pairs alike.
        return Double.isInfinite(p.bandwidthGBps()) && p.kind() != PathKind.LOC
                ? new TopoPath(p.kind(), t.smpGBps(), p.nvLinks()) : p;
    }

    /** The rings for {@code channels} channels, each logged as {@code Ring 00 : 0 -> 1 -> 3 -> 2 -> 0}. */
    public static List<Ring> plan(Topology t, List<String> busIdByRank, int channels, RingSearch.ChannelMode mode,
                                  CclLog log) {
        HopCosts costs = hopCosts(t, busIdByRank);
        List<Ring> rings = RingSearch.channels(costs, channels, mode);
        for (int c = 0; c < rings.size(); c++) {
            log.info(Subsys.GRAPH, "%s", logLine(c, rings.get(c)));
        }
        if (log.traceEnabled(Subsys.GRAPH)) {
            Ring r = rings.get(0);
            StringBuilder b = new StringBuilder("Ring 00 hops:");
            for (int i = 0; i < r.size(); i++) {
                int a = r.rankAt(i);
                int z = r.rankAt((i + 1) % r.size());
                TopoPath p = path(t, busIdByRank.get(a), busIdByRank.get(z));
                b.append(String.format(java.util.Locale.ROOT, " %d->%d %s %.1f GB/s;", a, z, p.label(),
                        Math.min(p.bandwidthGBps(), HopCosts.MAX_MBPS / 1000.0)));
            }
            log.trace(Subsys.GRAPH, "%s", b);
        }
        return rings;
    }

    /** {@code Ring 00 : 0 -> 1 -> 3 -> 2 -> 0}. */
    public static String logLine(int channel, Ring ring) {
        return String.format(java.util.Locale.ROOT, "Ring %02d : %s", channel, ring);
    }
}
