package org.sparkccl.core.topo;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.sparkccl.core.log.CclLog;
import org.sparkccl.core.log.Subsys;
import org.sparkccl.core.param.Params;

/**
 * Rings for a set of ranks on one machine: hop costs say how each pair is connected (from a topology
 * and each rank's GPU bus id, null for a rank without a GPU; or from what the ranks gathered:
 * {@link GpuRings}, {@link HostRings}), and {@link RingSearch} orders them, unless
 * {@code SPARKCCL_RINGS} forces the orders. Both engines and {@code bin/sparkccl-topo} plan through
 * here; every rank that passes the same costs and parameters gets the same rings.
 */
public final class RingPlanner {
    /**
     * Rings searched per communicator; later channels repeat them. Two: with {@code SPREAD} the second
     * takes what the first left (on full-duplex links, the other direction), and a search per channel
     * of 64 over 10 ranks would cost seconds at init.
     */
    public static final int SEARCHED_RINGS = 2;

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
     * The rings for {@code channels} channels over the GPUs of a topology: {@link #plan(HopCosts, Hops,
     * int, RingSearch.ChannelMode, Params, CclLog)} with the topology's hop costs and paths.
     */
    public static List<Ring> plan(Topology t, List<String> busIdByRank, int channels, RingSearch.ChannelMode mode,
                                  Params params, CclLog log) {
        boolean costDegraded = params.get(Params.AVOID_SLOW_LINKS);
        return plan(hopCosts(t, busIdByRank, costDegraded), (a, b) -> path(t, busIdByRank.get(a), busIdByRank.get(b),
                costDegraded), channels, mode, params, log);
    }

    /**
     * The rings for {@code channels} channels: {@code SPARKCCL_RINGS} where set (channel c runs forced
     * ring c modulo their number), else the ring search in {@code mode} over {@code costs} for the
     * first {@link #SEARCHED_RINGS} channels (one in {@code SAME} mode), which the later channels repeat
     * (channel c runs ring c modulo that number, as NCCL duplicates its searched rings). Each ring is logged at INFO (GRAPH) by
     * {@link #ringLine(int, Ring, Hops)}, with {@code hops} naming each hop's path.
     */
    public static List<Ring> plan(HopCosts costs, Hops hops, int channels, RingSearch.ChannelMode mode, Params params,
                                  CclLog log) {
        if (channels < 1) {
            throw new IllegalArgumentException("need at least one channel, got " + channels);
        }
        ForcedRings forced = ForcedRings.parse(params.get(Params.RINGS));
        List<Ring> given;
        if (forced.isEmpty()) {
            int searched = mode == RingSearch.ChannelMode.SAME ? 1 : Math.min(channels, SEARCHED_RINGS);
            given = RingSearch.channels(costs, searched, mode);
        } else {
            given = forced.rings(costs.size());
            log.info(Subsys.GRAPH, "rings forced by SPARKCCL_RINGS (%d given, %d channel%s)", given.size(), channels,
                    channels == 1 ? "" : "s");
            if (given.size() > channels) {
                log.warn(Subsys.GRAPH, "SPARKCCL_RINGS gives %d rings but the communicator runs %d channel%s: rings %d"
                        + " and later are not used; set SPARKCCL_NCHANNELS=%d to run them all", given.size(), channels,
                        channels == 1 ? "" : "s", channels, given.size());
            }
        }
        List<Ring> rings = new ArrayList<>();
        for (int c = 0; c < channels; c++) {
            rings.add(given.get(c % given.size()));
        }
        if (log.infoEnabled(Subsys.GRAPH)) {
            int shown = Math.min(channels, given.size());
            for (int c = 0; c < shown; c++) {
                log.info(Subsys.GRAPH, "%s", ringLine(c, rings.get(c), hops));
            }
            if (channels > shown && shown == 1) {
                log.info(Subsys.GRAPH, "Channels %02d..%02d run ring 00 too", shown, channels - 1);
            } else if (channels > shown) {
                log.info(Subsys.GRAPH, "Channels %02d..%02d repeat these rings: channel c runs ring c mod %d", shown,
                        channels - 1, shown);
            }
        }
        return rings;
    }

    /** What a hop between two ranks goes through, for the ring lines: kind, bandwidth, NVLinks. */
    @FunctionalInterface
    public interface Hops {
        TopoPath path(int fromRank, int toRank);
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
        boolean costDegraded = params.get(Params.AVOID_SLOW_LINKS);
        return ringLine(channel, ring, (a, b) -> path(t, busIdByRank.get(a), busIdByRank.get(b), costDegraded));
    }

    /**
     * {@link #ringLine(int, Ring, Topology, List, Params)} with the hops' paths from {@code hops}. A hop
     * of unknown bandwidth (NaN: ranks on host memory, whose costs are a model, not a rate) shows its
     * kind only, and then the line has no slowest figure: {@code Ring 00 : 0 -> 2 -> 1 -> 0   [NODE, SYS, SYS]}.
     */
    public static String ringLine(int channel, Ring ring, Hops hops) {
        String line = logLine(channel, ring);
        if (ring.size() < 2) {
            return line;
        }
        StringBuilder text = new StringBuilder();
        double slowest = Double.POSITIVE_INFINITY;
        boolean rates = true;
        for (int i = 0; i < ring.size(); i++) {
            TopoPath p = hops.path(ring.rankAt(i), ring.rankAt((i + 1) % ring.size()));
            text.append(i == 0 ? "" : ", ").append(p.label());
            if (Double.isNaN(p.bandwidthGBps())) {
                rates = false;
                continue;
            }
            double gbps = Math.min(p.bandwidthGBps(), HopCosts.MAX_MBPS / 1000.0);
            slowest = Math.min(slowest, gbps);
            text.append(' ').append(gbps(gbps));
        }
        return line + "   [" + text + (rates ? " GB/s; slowest " + gbps(slowest) + " GB/s]" : "]");
    }

    /** GB/s as a whole number where it is one, else with two decimals. */
    static String gbps(double v) {
        return v == Math.rint(v) ? String.format(Locale.ROOT, "%.0f", v) : String.format(Locale.ROOT, "%.2f", v);
    }
}
