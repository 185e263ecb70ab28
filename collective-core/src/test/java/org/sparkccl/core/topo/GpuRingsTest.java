package org.sparkccl.core.topo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.sparkccl.core.log.CclLog;
import org.sparkccl.core.param.Params;

/**
 * The GPU engine's rings from gathered facts, without a GPU: every rank's row goes through the bytes the
 * init round carries, each rank computes the rings from all rows, and all get the same rings, the ones
 * {@code bin/sparkccl-topo} shows for the machine (which are optimal against brute force: see
 * MachineRingsAndHealthTest).
 */
class GpuRingsTest {

    /** Each rank observes its own row from the topology, then every rank decodes what all sent. */
    private static List<GpuLinkFacts> gathered(Topology t, List<String> busIdByRank, boolean costDegraded) {
        List<GpuLinkFacts> rows = new ArrayList<>();
        for (int r = 0; r < busIdByRank.size(); r++) {
            byte[] sent = GpuLinkFacts.observe(t, busIdByRank.get(r), Map.of(), costDegraded).encode();
            rows.add(GpuLinkFacts.decode(sent, r));
        }
        return rows;
    }

    private static boolean[][] allP2p(int n) {
        boolean[][] p2p = new boolean[n][n];
        for (boolean[] row : p2p) {
            Arrays.fill(row, true);
        }
        return p2p;
    }

    @Test
    void theDegradedDualSocketBoxGetsTheToolsRingsOnEveryRank(@TempDir Path dir) {
        SysfsFixture f = new SysfsFixture(dir);
        List<String> gpus = SysfsFixture.dualSocketEightGpus(f, true);
        f.link(gpus.get(5), SysfsFixture.GEN3, 8, SysfsFixture.GEN4, 16);
        Topology t = SysfsReader.read(dir);
        List<String> busIds = MachineRingsAndHealthTest.scrambled(gpus);
        Params params = Params.defaults();

        List<GpuLinkFacts> rows = gathered(t, busIds, true);
        boolean[][] p2p = allP2p(8);
        assertEquals(RingPlanner.hopCosts(t, busIds).bandwidth(0, 1), GpuRings.hopCosts(rows, p2p).bandwidth(0, 1));
        List<Ring> tool = RingPlanner.plan(t, busIds, 2, RingSearch.ChannelMode.SPREAD, params, new CclLog(0, params));
        for (int rank = 0; rank < 8; rank++) {
            List<Ring> mine = GpuRings.plan(gathered(t, busIds, true), p2p, 6, params, new CclLog(rank, params));
            assertEquals(List.of(tool.get(0), tool.get(1), tool.get(0), tool.get(1), tool.get(0), tool.get(1)), mine,
                    "rank " + rank + ": two searched rings, repeated over the channels");
        }
        HopCosts costs = GpuRings.hopCosts(rows, p2p);
        Ring first = GpuRings.plan(rows, p2p, 1, params, new CclLog(0, params)).get(0);
        assertEquals(RingScore.of(costs, RingSearchTest.bruteForce(costs).order()), RingScore.of(costs, first.order()));
        assertEquals(HopCosts.toMBps(8.0 * 8 * 128 / 130 / 8), RingScore.of(costs, first.order()).slowestMBps(),
                "the trained-down GPU is costed at Gen3 x8");
    }

    @Test
    void aStagedHopCrossesTheHostBridgeAtItsPcieRateEvenWithNvLink(@TempDir Path dir) {
        List<String> gpus = SysfsFixture.fourGpusBehindOneSwitch(new SysfsFixture(dir), SysfsFixture.GEN4);
        Topology t = SysfsReader.read(dir).withNvLink(gpus.get(0), gpus.get(1), 12);
        List<GpuLinkFacts> rows = gathered(t, gpus, true);
        boolean[][] p2p = allP2p(4);
        assertEquals("NV12", GpuRings.path(rows, p2p, 0, 1).label());
        assertEquals(300.0, GpuRings.path(rows, p2p, 0, 1).bandwidthGBps(), 1e-9);
        p2p[0][1] = false;
        TopoPath staged = GpuRings.path(rows, p2p, 0, 1);
        assertEquals(PathKind.PHB, staged.kind(), "host staging goes through the host bridge");
        assertEquals(31.508, staged.bandwidthGBps(), 1e-9);
        assertEquals(PathKind.NVL, GpuRings.path(rows, p2p, 1, 0).kind(), "the other direction is still P2P");
    }

    @Test
    void ranksOnOneGpuAreLocalAndKeepRankOrder(@TempDir Path dir) {
        List<String> gpus = SysfsFixture.h200Pair(new SysfsFixture(dir));
        Topology t = SysfsReader.read(dir);
        List<String> busIds = List.of(gpus.get(0), gpus.get(0), gpus.get(0), gpus.get(0));
        List<GpuLinkFacts> rows = gathered(t, busIds, true);
        assertEquals(PathKind.LOC, GpuRings.path(rows, allP2p(4), 2, 3).kind());
        Params params = Params.defaults();
        assertEquals("0 -> 1 -> 2 -> 3 -> 0", GpuRings.plan(rows, allP2p(4), 1, params, new CclLog(0, params)).get(0)
                .toString());
        Params forced = params.withOverrides(Map.of("SPARKCCL_RINGS", "0 2 1 3|0 3 1 2"));
        assertEquals(List.of("0 -> 2 -> 1 -> 3 -> 0", "0 -> 3 -> 1 -> 2 -> 0", "0 -> 2 -> 1 -> 3 -> 0"),
                GpuRings.plan(rows, allP2p(4), 3, forced, new CclLog(0, forced)).stream().map(Ring::toString).toList());
    }

    /** Four GPUs whose PCIe paths all tie; CUDA's P2P performance rank says pairs (0, 2) and (1, 3) are better. */
    @Test
    void theP2pPerformanceRankBreaksTiesBetweenPathsOfOneKind(@TempDir Path dir) {
        List<String> gpus = SysfsFixture.fourGpusBehindOneSwitch(new SysfsFixture(dir), SysfsFixture.GEN4);
        Topology t = SysfsReader.read(dir);
        List<GpuLinkFacts> rows = new ArrayList<>();
        for (int r = 0; r < 4; r++) {
            Map<String, Integer> ranks = Map.of(gpus.get((r + 1) % 4), 1, gpus.get((r + 2) % 4), 0, gpus.get((r + 3) % 4), 1);
            rows.add(GpuLinkFacts.decode(GpuLinkFacts.observe(t, gpus.get(r), ranks, true).encode(), r));
        }
        Params params = Params.defaults();
        Ring ring = GpuRings.plan(rows, allP2p(4), 1, params, new CclLog(0, params)).get(0);
        assertEquals("0 -> 1 -> 3 -> 2 -> 0", ring.toString(), "hops 1 -> 3 and 2 -> 0 are the better P2P pairs");
        assertEquals("0 -> 1 -> 2 -> 3 -> 0",
                RingPlanner.plan(t, gpus, 1, RingSearch.ChannelMode.SAME, params, new CclLog(0, params)).get(0).toString(),
                "without performance ranks, all rings tie and rank order wins");
    }

    @Test
    void busIdsFromCudaAndNvmlMatchSysfs() {
        assertEquals("0000:19:00.0", GpuLinkFacts.normalizeBusId("00000000:19:00.0"));
        assertEquals("0000:8a:00.0", GpuLinkFacts.normalizeBusId("0000:8A:00.0"));
        assertEquals("0001:8a:00.0", GpuLinkFacts.normalizeBusId("00000001:8a:00.0"));
    }

    @Test
    void damagedFactsAreRefusedNamingTheRank() {
        byte[] good = new GpuLinkFacts("0000:19:00.0", List.of(new GpuLinkFacts.Peer("0000:8a:00.0", PathKind.NVL, 450_000,
                18, PathKind.NODE, 63_015, 0))).encode();
        assertEquals("0000:8a:00.0", GpuLinkFacts.decode(good, 1).peers().get(0).busId());
        byte[] truncated = Arrays.copyOf(good, good.length - 3);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> GpuLinkFacts.decode(truncated, 3));
        assertTrue(e.getMessage().contains("rank 3"), e.getMessage());
        byte[] longer = Arrays.copyOf(good, good.length + 1);
        assertThrows(IllegalArgumentException.class, () -> GpuLinkFacts.decode(longer, 3));
    }
}
