package org.sparkccl.core.topo;

import java.util.List;
import org.sparkccl.core.log.CclLog;
import org.sparkccl.core.param.Params;

/**
 * The GPU engine's rings, from what its ranks gathered: each rank's {@link GpuLinkFacts} row and which
 * ordered pairs of ranks run peer-to-peer ({@code p2p[a][b]}: a sends to b over P2P; decided by the
 * engine from CUDA's peer access). A P2P hop costs the path of the sender's row (NVLink where there is
 * one); a host-staged hop crosses the host bridge, so it costs the row's PCIe path, at least PHB. Ranks
 * on one GPU are {@link PathKind#LOC}. Ties between paths of one kind go to the better CUDA P2P
 * performance rank. With every pair P2P and the same topology on every rank the costs are those of
 * {@link RingPlanner#hopCosts}, so {@code bin/sparkccl-topo} shows the same rings.
 */
public final class GpuRings {
    /** Closeness is kind * this + the P2P performance rank (capped below it): the kind decides first. */
    private static final int KIND_WEIGHT = 1000;
    private static final int MAX_PERFORMANCE_RANK = 99;

    private GpuRings() {
    }

    /** How rank {@code a}'s data reaches rank {@code b}'s GPU. */
    public static TopoPath path(List<GpuLinkFacts> byRank, boolean[][] p2p, int a, int b) {
        GpuLinkFacts from = byRank.get(a);
        String to = byRank.get(b).busId();
        if (from.busId().equals(to)) {
            return new TopoPath(PathKind.LOC, Double.POSITIVE_INFINITY, 0);
        }
        GpuLinkFacts.Peer peer = from.peer(to);
        if (peer == null) {
            return new TopoPath(PathKind.SYS, Topology.DEFAULT_SMP_GBPS, 0);
        }
        if (p2p[a][b]) {
            return new TopoPath(peer.kind(), peer.bandwidthMBps() / 1000.0, peer.nvLinks());
        }
        PathKind kind = peer.pcieKind().compareTo(PathKind.PHB) < 0 ? PathKind.PHB : peer.pcieKind();
        return new TopoPath(kind, peer.pcieBandwidthMBps() / 1000.0, 0);
    }

    public static HopCosts hopCosts(List<GpuLinkFacts> byRank, boolean[][] p2p) {
        int n = byRank.size();
        long[][] bw = new long[n][n];
        int[][] close = new int[n][n];
        for (int a = 0; a < n; a++) {
            for (int b = 0; b < n; b++) {
                TopoPath p = path(byRank, p2p, a, b);
                bw[a][b] = HopCosts.toMBps(p.bandwidthGBps());
                GpuLinkFacts.Peer peer = byRank.get(a).peer(byRank.get(b).busId());
                int rank = peer == null || !p2p[a][b] || peer.p2pPerformanceRank() < 0 ? MAX_PERFORMANCE_RANK
                        : Math.min(MAX_PERFORMANCE_RANK, peer.p2pPerformanceRank());
                close[a][b] = p.kind().ordinal() * KIND_WEIGHT + (p.kind() == PathKind.LOC ? 0 : rank);
            }
        }
        return new HopCosts(bw, close);
    }

    /**
     * The rings for {@code channels} channels, each searched over what the earlier ones left
     * ({@link RingSearch.ChannelMode#SPREAD}, as the tool shows them), logged at INFO (GRAPH).
     */
    public static List<Ring> plan(List<GpuLinkFacts> byRank, boolean[][] p2p, int channels, Params params, CclLog log) {
        return RingPlanner.plan(hopCosts(byRank, p2p), (a, b) -> path(byRank, p2p, a, b), channels,
                RingSearch.ChannelMode.SPREAD, params, log);
    }
}
