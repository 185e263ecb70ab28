package org.sparkccl.ipc.gpu;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.sparkccl.core.CclException;
import org.sparkccl.core.log.CclLog;
import org.sparkccl.core.log.Subsys;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.topo.GpuLinkFacts;
import org.sparkccl.core.topo.GpuRings;
import org.sparkccl.core.topo.LinkHealth;
import org.sparkccl.core.topo.Ring;
import org.sparkccl.core.topo.RingSettings;
import org.sparkccl.core.topo.Topology;
import org.sparkccl.core.topo.TopologySource;
import org.sparkccl.core.transport.RankInfo;
import org.sparkccl.ipc.cuda.CudaDevice;
import org.sparkccl.ipc.cuda.GpuSupport;

/**
 * What the GPU communicator's ranks send in the init round so that every rank computes the same rings:
 * each rank's {@link GpuLinkFacts} row (its topology's paths from its GPU to the others, CUDA's P2P
 * performance ranks) and its {@link RingSettings}. After the round, the rings come from those bytes
 * alone ({@link #rings}, no CUDA call), and the lowest rank on each GPU warns about that GPU's link
 * health ({@link #warnLinkHealth}).
 */
final class GpuRingFacts {
    static final String ENTRY_LINKS = "gpu.links";
    static final String ENTRY_RING_SETTINGS = "gpu.rings";

    /** What this rank saw: its topology (for the link-health warning) and its row. */
    record Observed(Topology topology, GpuLinkFacts facts) {
        /** {@code me} with the row and this rank's ring settings added. */
        RankInfo addTo(RankInfo me, Params params) {
            return me.withEntry(ENTRY_LINKS, facts.encode()).withEntry(ENTRY_RING_SETTINGS, RingSettings.of(params).encode());
        }
    }

    private GpuRingFacts() {
    }

    /**
     * This rank's facts: the topology from {@code SPARKCCL_TOPO_FILE} or sysfs (where neither can be read,
     * none: its GPU then looks alike to every other, and the log says why), and the P2P performance
     * rank from {@code device} to every other GPU this process sees (none with P2P disabled).
     */
    static Observed observe(CudaDevice device, boolean p2pDisabled, Params params, CclLog log) {
        Topology topology;
        try {
            topology = TopologySource.load(params);
        } catch (RuntimeException e) {
            log.warn(Subsys.GRAPH, "cannot read the machine's topology (%s): rings keep rank order unless"
                    + " SPARKCCL_RINGS says otherwise; give SPARKCCL_TOPO_FILE to fix", e.getMessage());
            topology = Topology.empty();
        }
        // With P2P off, the other GPUs are left alone: asking them would retain a context on each.
        Map<String, Integer> p2pRanks = new LinkedHashMap<>();
        for (int i = 0; !p2pDisabled && i < GpuSupport.deviceCount(); i++) {
            CudaDevice other = CudaDevice.get(i);
            if (other != device) {
                p2pRanks.put(other.pciBusId(), device.p2pPerformanceRank(other));
            }
        }
        return new Observed(topology, GpuLinkFacts.observe(topology, device.pciBusId(), p2pRanks,
                params.get(Params.AVOID_SLOW_LINKS)));
    }

    /** {@code p2p[a][b]}: rank a sends to rank b peer-to-peer, as {@link GpuRankInfo#p2pLink} decides. */
    static boolean[][] p2pMatrix(GpuRankInfo[] gpus) {
        int n = gpus.length;
        boolean[][] p2p = new boolean[n][n];
        for (int a = 0; a < n; a++) {
            for (int b = 0; b < n; b++) {
                p2p[a][b] = a == b || GpuRankInfo.p2pLink(gpus[a], gpus[b]);
            }
        }
        return p2p;
    }

    /**
     * The ring of each of {@code channels} channels from what every rank sent: the same on every rank.
     * Fails naming the rank whose ring settings differ from this rank's.
     */
    static List<Ring> rings(RankInfo[] infos, GpuRankInfo[] gpus, int rank, int channels, Params params, CclLog log) {
        RingSettings[] settings = new RingSettings[infos.length];
        List<GpuLinkFacts> rows = new ArrayList<>();
        for (int r = 0; r < infos.length; r++) {
            settings[r] = RingSettings.decode(infos[r].entry(ENTRY_RING_SETTINGS), r);
            rows.add(GpuLinkFacts.decode(infos[r].entry(ENTRY_LINKS), r));
        }
        RingSettings.requireSame(settings, rank);
        try {
            return GpuRings.plan(rows, p2pMatrix(gpus), channels, params, log);
        } catch (IllegalArgumentException e) {
            throw new CclException("rank " + rank + ": " + e.getMessage(), e);
        }
    }

    /**
     * One WARN per GPU whose link runs below its capability or has AER errors: from the lowest rank on
     * that GPU, so that ranks sharing a GPU do not repeat it. Returns the warning (null if none).
     */
    static String warnLinkHealth(Topology topology, GpuRankInfo[] gpus, int rank, CclLog log) {
        for (int r = 0; r < rank; r++) {
            if (gpus[r].sameGpu(gpus[rank])) {
                return null;
            }
        }
        String warning = LinkHealth.warning(topology, GpuLinkFacts.normalizeBusId(gpus[rank].pciBusId));
        if (warning != null) {
            log.warn(Subsys.INIT, "%s", warning);
        }
        return warning;
    }
}
