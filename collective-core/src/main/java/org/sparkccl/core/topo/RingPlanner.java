package org.sparkccl.core.topo;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.sparkccl.core.log.CclLog;
import org.sparkccl.core.log.Subsys;
import org.sparkccl.core.param.Params;

/**
 * Rings for a set of ranks on one machine: each rank names its GPU's bus id (null for a rank
 * without a GPU), the topology says how each pair is connected, and {@link RingSearch} orders them,
 * unless {@code SPARKCCL_RINGS} forces the orders. This is the one entry point both engines are meant
 * to call; every rank that passes the same bus ids, topology and parameters gets the same rings.
 */
public final class RingPlanner {
    private RingPlanner() {
    }

    /** {@link #hopCosts(Topology, List, boolean)} with degraded links costed as they run. */
    public static HopCosts hopCosts(Topology t, List<String> busIdByRank) {
        return hopCosts(t, busIdByRank, true);
    }

    /**
     * Hop costs between ranks. A pair where either rank has no GPU, or a GPU the topology does not
     * know, counts as {@link PathKind#SYS} at the topology's SMP bandwidth: ranks without GPUs all
     * look alike, and ring search then keeps them in rank order. {@code costDegradedLinks}: see
     * {@link Topology#path(String, String, boolean)}.
     */
    public static HopCosts hopCosts(Topology t, List<String> busIdByRank, boolean costDegradedLinks) {
        int n = busIdByRank.size();
        long[][] bw = new long[n][n];
        int[][] close = new int[n][n];
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < n; j++) {
                TopoPath p = path(t, busIdByRank.get(i), busIdByRank.get(j), costDegradedLinks);
                bw[i][j] = HopCosts.toMBps(p.bandwidthGBps());
                close[i][j] = p.kind().ordinal();
            }
        }
        return new HopCosts(bw, close);
    }

    /** The path between two ranks' GPUs, as {@link #hopCosts} counts it, degraded links as they run. */
    public static TopoPath path(Topology t, String busIdA, String busIdB) {
        return path(t, busIdA, busIdB, true);
    }

    /** The path between two ranks' GPUs, as {@link #hopCosts} counts it. */
    public static TopoPath path(Topology t, String busIdA, String busIdB, boolean costDegradedLinks) {
        if (busIdA == null || busIdB == null || t.device(busIdA) == null || t.device(busIdB) == null) {
            return new TopoPath(PathKind.SYS, t.smpGBps(), 0);
        }
        TopoPath p = t.path(busIdA, busIdB, costDegradedLinks);
        // A path without link information (some virtual machines) still needs a number; the SMP figure
        // keeps such pairs alike.
        return Double.isInfinite(p.bandwidthGBps()) && p.kind() != PathKind.LOC
                ? new TopoPath(p.kind(), t.smpGBps(), p.nvLinks()) : p;
    }

    /**
     * The rings for {@code channels} channels: {@code SPARKCCL_RINGS} where set (channel c runs forced
     * ring c modulo their number), else the ring search in {@code mode}, costing links as
     * {@code SPARKCCL_AVOID_SLOW_LINKS} says. Each ring is logged at INFO (GRAPH) by {@link #ringLine}.
     */
    public static List<Ring> plan(Topology t, List<String> busIdByRank, int channels, RingSearch.ChannelMode mode,
                                  Params params, CclLog log) {
        if (channels < 1) {
            throw new IllegalArgumentException("need at least one channel, got " + channels);
        }
        ForcedRings forced = ForcedRings.parse(params.get(Params.RINGS));
        List<Ring> rings;
        if (forced.isEmpty()) {
            HopCosts costs = hopCosts(t, busIdByRank, params.get(Params.AVOID_SLOW_LINKS));
            rings = RingSearch.channels(costs, channels, mode);
        } else {
            List<Ring> given = forced.rings(busIdByRank.size());
            rings = new ArrayList<>();
            for (int c = 0; c < channels; c++) {
                rings.add(given.get(c % given.size()));
            }
            log.info(Subsys.GRAPH, "rings forced by SPARKCCL_RINGS (%d given, %d channel%s)", given.size(), channels,
                    channels == 1 ? "" : "s");
            if (given.size() > channels) {
                log.warn(Subsys.GRAPH, "SPARKCCL_RINGS gives %d rings but the communicator runs %d channel%s: rings %d"
                        + " and later are not used; set SPARKCCL_NCHANNELS=%d to run them all", given.size(), channels,
                        channels == 1 ? "" : "s", channels, given.size());
            }
        }
        if (log.infoEnabled(Subsys.GRAPH)) {
            for (int c = 0; c < rings.size(); c++) {
                log.info(Subsys.GRAPH, "%s", ringLine(c, rings.get(c), t, busIdByRank, params));
            }
        }
        return rings;
    }

    /** {@code Ring 00 : 0 -> 1 -> 3 -> 2 -> 0}: NCCL's form. */
    public static String logLine(int channel, Ring ring) {
        return String.format(Locale.ROOT, "Ring %02d : %s", channel, ring);
    }

    /**
     * NCCL's ring line followed by each hop's path kind and bandwidth, as the planner costs them, and
     * the slowest: {@code Ring 00 : 0 -> 1 -> 0   [NV18 450, NV18 450 GB/s; slowest 450 GB/s]}. The one
     * format for {@code SPARKCCL_DEBUG=INFO} and {@code bin/sparkccl-topo}, so the two can be compared.
     */
    public static String ringLine(int channel, Ring ring, Topology t, List<String> busIdByRank, Params params) {
        String line = logLine(channel, ring);
        if (ring.size() < 2) {
            return line;
        }
        boolean costDegraded = params.get(Params.AVOID_SLOW_LINKS);
        StringBuilder hops = new StringBuilder();
        double slowest = Double.POSITIVE_INFINITY;
        for (int i = 0; i < ring.size(); i++) {
            int a = ring.rankAt(i);
            int b = ring.rankAt((i + 1) % ring.size());
            TopoPath p = path(t, busIdByRank.get(a), busIdByRank.get(b), costDegraded);
            double gbps = Math.min(p.bandwidthGBps(), HopCosts.MAX_MBPS / 1000.0);
            slowest = Math.min(slowest, gbps);
            hops.append(i == 0 ? "" : ", ").append(p.label()).append(' ').append(gbps(gbps));
        }
        return line + "   [" + hops + " GB/s; slowest " + gbps(slowest) + " GB/s]";
    }

    /** GB/s as a whole number where it is one, else with two decimals. */
    static String gbps(double v) {
        return v == Math.rint(v) ? String.format(Locale.ROOT, "%.0f", v) : String.format(Locale.ROOT, "%.2f", v);
    }
}
