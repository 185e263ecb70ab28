package org.sparkccl.core.topo;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.sparkccl.core.log.CclLog;
import org.sparkccl.core.param.Params;

/** The host engine's rings from its ranks' placements: sockets crossed as few times as can be, then near cores. */
class HostRingsTest {
    private static final List<NumaNode> TWO_SOCKETS = List.of(new NumaNode(0, "0-7,16-23"), new NumaNode(1, "8-15,24-31"));

    private static Ring plan(List<HostPlacement> placements, Params params) {
        return HostRings.plan(placements, 1, params, new CclLog(0, params)).get(0);
    }

    private static int socketCrossings(Ring ring, List<HostPlacement> placements) {
        int crossings = 0;
        for (int i = 0; i < ring.size(); i++) {
            crossings += placements.get(ring.rankAt(i)).numaNode() != placements.get(ring.rankAt((i + 1) % ring.size()))
                    .numaNode() ? 1 : 0;
        }
        return crossings;
    }

    @Test
    void ranksAlternatingOverTwoSocketsCrossThemTwiceAndFollowTheCores() {
        List<HostPlacement> placements = new ArrayList<>();
        int[] cpus = {0, 8, 1, 9, 2, 10, 3, 11};
        for (int cpu : cpus) {
            placements.add(HostPlacement.of(TWO_SOCKETS, Integer.toString(cpu)));
        }
        assertEquals(1, placements.get(1).numaNode());
        Ring ring = plan(placements, Params.defaults());
        assertEquals(2, socketCrossings(ring, placements), ring.toString());
        HopCosts costs = HostRings.hopCosts(placements);
        assertEquals(RingScore.of(costs, RingSearchTest.bruteForce(costs).order()), RingScore.of(costs, ring.order()));
        assertEquals("0 -> 1 -> 3 -> 5 -> 7 -> 6 -> 4 -> 2 -> 0", ring.toString(),
                "socket 1's cores in order, then socket 0's back");
        assertEquals("Ring 00 : 0 -> 1 -> 3 -> 5 -> 7 -> 6 -> 4 -> 2 -> 0   [SYS, NODE, NODE, NODE, SYS, NODE, NODE, NODE]",
                RingPlanner.ringLine(0, ring, (a, b) -> HostRings.path(placements.get(a), placements.get(b))));
    }

    @Test
    void unboundRanksAndUnknownNodesKeepRankOrderUnlessForced() {
        List<HostPlacement> unbound = new ArrayList<>();
        for (int r = 0; r < 5; r++) {
            unbound.add(HostPlacement.of(TWO_SOCKETS, "0-31")); // rank threads of one unbound JVM
        }
        assertEquals("0 -> 1 -> 2 -> 3 -> 4 -> 0", plan(unbound, Params.defaults()).toString());
        List<HostPlacement> unknown = new ArrayList<>();
        for (int r = 0; r < 4; r++) {
            unknown.add(HostPlacement.of(List.of(), "")); // no /proc, no sysfs
        }
        assertEquals(-1, unknown.get(0).numaNode());
        assertEquals("0 -> 1 -> 2 -> 3 -> 0", plan(unknown, Params.defaults()).toString());
        Params forced = Params.defaults().withOverrides(Map.of("SPARKCCL_RINGS", "3 1 2 0"));
        assertEquals("3 -> 1 -> 2 -> 0 -> 3", plan(unknown, forced).toString());
    }

    @Test
    void placementsSurviveTheRound() {
        HostPlacement p = HostPlacement.of(TWO_SOCKETS, "8-9,11");
        assertEquals(new HostPlacement(1, "8-9,11"), HostPlacement.decode(p.encode(), 2));
        assertEquals(8, p.firstCpu());
        assertEquals("0-3,5", CpuList.format(CpuList.parse("5,0-2,3")));
    }
}
