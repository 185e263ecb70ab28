package org.sparkccl.core.topo;

import java.util.List;
import org.sparkccl.core.log.CclLog;
import org.sparkccl.core.param.Params;

/**
 * The host engine's rings: ranks on one NUMA node next to each other, so that the ring crosses the
 * SMP interconnect between sockets as few times as it can (twice for two sockets, whatever the rank
 * order), and within a node, ranks on nearby cores next to each other (neighbouring cores often share
 * a cache). Ranks whose node is unknown count as on every rank's node; ranks with the same CPUs (rank
 * threads of one unbound JVM) all look alike, and the ring then keeps rank order.
 */
public final class HostRings {
    /** Closeness of a hop that crosses sockets; within a node, closeness is the core distance below it. */
    private static final int CROSS_NODE = 1 << 20;

    private HostRings() {
    }

    /** Same node: NODE; across nodes: SYS. The rate is a model's, not a measurement, so it is NaN. */
    public static TopoPath path(HostPlacement a, HostPlacement b) {
        return new TopoPath(sameNode(a, b) ? PathKind.NODE : PathKind.SYS, Double.NaN, 0);
    }

    public static HopCosts hopCosts(List<HostPlacement> byRank) {
        int n = byRank.size();
        long[][] bw = new long[n][n];
        int[][] close = new int[n][n];
        long smp = HopCosts.toMBps(Topology.DEFAULT_SMP_GBPS);
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < n; j++) {
                HostPlacement a = byRank.get(i);
                HostPlacement b = byRank.get(j);
                bw[i][j] = sameNode(a, b) ? HopCosts.MAX_MBPS : smp;
                close[i][j] = (sameNode(a, b) ? 0 : CROSS_NODE) + coreDistance(a, b);
            }
        }
        return new HopCosts(bw, close);
    }

    /** The rings for {@code channels} channels, logged at INFO (GRAPH): see {@link RingPlanner#plan}. */
    public static List<Ring> plan(List<HostPlacement> byRank, int channels, Params params, CclLog log) {
        return RingPlanner.plan(hopCosts(byRank), (a, b) -> path(byRank.get(a), byRank.get(b)), channels,
                RingSearch.ChannelMode.SAME, params, log);
    }

    private static boolean sameNode(HostPlacement a, HostPlacement b) {
        return a.numaNode() < 0 || b.numaNode() < 0 || a.numaNode() == b.numaNode();
    }

    /** 0 for ranks that may share a CPU (or whose CPUs are unknown), else how far apart their first CPUs are. */
    private static int coreDistance(HostPlacement a, HostPlacement b) {
        if (a.firstCpu() < 0 || b.firstCpu() < 0 || a.sharesCpus(b)) {
            return 0;
        }
        return Math.min(CROSS_NODE - 1, Math.abs(a.firstCpu() - b.firstCpu()));
    }
}
