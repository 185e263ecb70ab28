package org.sparkccl.core.shm;

import org.sparkccl.core.CclException;
import java.util.ArrayList;
import java.util.List;
import org.sparkccl.core.log.CclLog;
import org.sparkccl.core.log.Subsys;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.topo.HostPlacement;
import org.sparkccl.core.topo.HostRings;
import org.sparkccl.core.topo.Ring;
import org.sparkccl.core.topo.RingSettings;
import org.sparkccl.core.transport.RankInfo;

/**
 * What the host engine's ranks send in the init round so that every rank computes the same rings:
 * each rank's {@link HostPlacement} (NUMA node, CPUs) and {@link RingSettings}; after the round, the
 * rings ({@link HostRings}), one per channel.
 */
final class ShmRingFacts {
    static final String ENTRY_PLACEMENT = "host.placement";
    static final String ENTRY_RING_SETTINGS = "host.rings";

    private ShmRingFacts() {
    }

    /**
     * {@code me} with this rank's placement and ring settings added. A placement that cannot be read (a
     * topology file that does not parse) is logged and sent as unknown: failing here, before the round,
     * would leave the other ranks waiting for this one until the bootstrap times out.
     */
    static RankInfo describe(RankInfo me, Params params, CclLog log) {
        HostPlacement placement;
        try {
            placement = HostPlacement.observe(params);
        } catch (RuntimeException e) {
            log.warn(Subsys.GRAPH, "cannot tell this rank's NUMA node (%s): the ring treats it as near every rank",
                    e.getMessage());
            placement = HostPlacement.of(List.of(), "");
        }
        return me.withEntry(ENTRY_PLACEMENT, placement.encode())
                .withEntry(ENTRY_RING_SETTINGS, RingSettings.of(params).encode());
    }

    /** The ring of each of {@code channels} channels, the same on every rank; fails where settings differ. */
    static List<Ring> rings(RankInfo[] infos, int rank, int channels, Params params, CclLog log) {
        RingSettings[] settings = new RingSettings[infos.length];
        List<HostPlacement> placements = new ArrayList<>();
        for (int r = 0; r < infos.length; r++) {
            settings[r] = RingSettings.decode(infos[r].entry(ENTRY_RING_SETTINGS), r);
            placements.add(HostPlacement.decode(infos[r].entry(ENTRY_PLACEMENT), r));
        }
        RingSettings.requireSame(settings, rank);
        try {
            return HostRings.plan(placements, channels, params, log);
        } catch (IllegalArgumentException e) {
            throw new CclException("rank " + rank + ": " + e.getMessage(), e);
        }
    }
}
