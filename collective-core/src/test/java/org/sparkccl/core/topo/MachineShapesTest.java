package org.sparkccl.core.topo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.sparkccl.core.log.CclLog;
import org.sparkccl.core.param.Params;

/** Rings on the machine shapes sparkccl meets, built as sysfs fixtures. */
class MachineShapesTest {
    private static final CclLog LOG = new CclLog(0, Params.defaults());

    @ParameterizedTest(name = "cascaded switches: {0}")
    @ValueSource(booleans = {true, false})
    void dualSocketPcieBoxKeepsSwitchPairsTogetherAndCrossesSocketsTwice(boolean cascaded, @TempDir Path dir) {
        List<String> gpus = SysfsFixture.dualSocketEightGpus(new SysfsFixture(dir), cascaded);
        Topology t = SysfsReader.read(dir);
        // Ranks get the GPUs in a scrambled order, so rank order alone would be a poor ring.
        int[] gpuOfRank = {0, 4, 2, 6, 1, 7, 3, 5};
        List<String> busIds = new ArrayList<>();
        for (int g : gpuOfRank) {
            busIds.add(gpus.get(g));
        }
        Ring ring = RingPlanner.plan(t, busIds, 1, RingSearch.ChannelMode.SAME, Params.defaults(), LOG).get(0);
        int crossings = 0;
        for (int i = 0; i < 8; i++) {
            int a = ring.rankAt(i);
            int b = ring.rankAt((i + 1) % 8);
            crossings += gpuOfRank[a] / 4 != gpuOfRank[b] / 4 ? 1 : 0;
            // Each GPU's switch partner is right before or after it.
            int partner = gpuOfRank[a] ^ 1;
            int left = gpuOfRank[ring.prev(a)];
            int right = gpuOfRank[ring.next(a)];
            assertTrue(left == partner || right == partner, "GPU " + gpuOfRank[a] + " away from its switch partner in " + ring);
        }
        assertEquals(2, crossings, ring.toString());
        // The same on every rank, and what the heuristic finds too.
        HopCosts costs = RingPlanner.hopCosts(SysfsReader.read(dir), busIds);
        assertEquals(ring, RingSearch.best(costs));
        assertEquals(RingScore.of(costs, ring.order()), RingScore.of(costs, RingSearch.heuristic(costs).order()));
    }

    @Test
    void nvswitchBoxAnyRingIsOptimalAndTheChoiceIsDeterministic(@TempDir Path dir) throws IOException {
        Path sys = dir.resolve("sys");
        SysfsFixture f = new SysfsFixture(sys).numaNode(0, "0-55").numaNode(1, "56-111");
        List<String> gpus = new ArrayList<>();
        for (int socket = 0; socket < 2; socket++) {
            for (int k = 0; k < 2; k++) {
                int bus = socket * 0x80 + 0x20 * k;
                String hb = SysfsFixture.hostBridgeName(bus);
                f.hostBridge(hb).bridge(hb, SysfsFixture.bdf(bus, 1), socket);
                gpus.addAll(f.switchWithTwoGpus(SysfsFixture.bdf(bus, 1), bus + 0x10, socket));
            }
        }
        StringBuilder file = new StringBuilder("# HGX: every GPU pair through the NVSwitches\n");
        for (int i = 0; i < 8; i++) {
            for (int j = i + 1; j < 8; j++) {
                file.append("nvlink ").append(gpus.get(i)).append(' ').append(gpus.get(j)).append(" 18\n");
            }
        }
        Path topo = dir.resolve("hgx.topo");
        Files.writeString(topo, file.toString());
        Topology t = TopologySource.load(sys, topo);
        for (String a : gpus) {
            for (String b : gpus) {
                assertEquals(a.equals(b) ? PathKind.LOC : PathKind.NVL, t.path(a, b).kind());
            }
        }
        HopCosts costs = RingPlanner.hopCosts(t, gpus);
        Ring ring = RingSearch.best(costs);
        assertEquals("0 -> 1 -> 2 -> 3 -> 4 -> 5 -> 6 -> 7 -> 0", ring.toString());
        Random rnd = new Random(11);
        for (int trial = 0; trial < 20; trial++) {
            List<Integer> order = new ArrayList<>(List.of(1, 2, 3, 4, 5, 6, 7));
            java.util.Collections.shuffle(order, rnd);
            int[] o = new int[8];
            for (int i = 1; i < 8; i++) {
                o[i] = order.get(i - 1);
            }
            assertEquals(RingScore.of(costs, ring.order()), RingScore.of(costs, o));
        }
        assertEquals(new RingScore(450_000, 8 * 450_000, 8 * PathKind.NVL.ordinal()), RingScore.of(costs, ring.order()));
        assertEquals(ring, RingSearch.best(RingPlanner.hopCosts(TopologySource.load(sys, topo), gpus)));
    }

    @Test
    void singleGpu(@TempDir Path dir) {
        SysfsFixture f = new SysfsFixture(dir).numaNode(0, "0-15").hostBridge("pci0000:00");
        f.bridge("pci0000:00", "0000:00:01.0", 0).gpu("0000:00:01.0", "0000:01:00.0", 0);
        Topology t = SysfsReader.read(dir);
        assertEquals(1, t.gpus().size());
        List<Ring> rings = RingPlanner.plan(t, List.of("0000:01:00.0"), 2, RingSearch.ChannelMode.SPREAD, Params.defaults(), LOG);
        assertEquals(2, rings.size());
        assertEquals("Ring 00 : 0 -> 0", RingPlanner.logLine(0, rings.get(0)));
    }

    @Test
    void twoGpusWithEighteenNvLinksLikeTheH200Machine(@TempDir Path dir) {
        SysfsFixture.h200Pair(new SysfsFixture(dir));
        Topology pcie = SysfsReader.read(dir);
        assertEquals(PathKind.NODE, pcie.path("0000:19:00.0", "0000:8a:00.0").kind());
        Topology t = pcie.withNvLink("0000:19:00.0", "0000:8a:00.0", 18);
        TopoPath p = t.path("0000:8a:00.0", "0000:19:00.0");
        assertEquals("NV18", p.label());
        assertEquals(450.0, p.bandwidthGBps());
        List<String> busIds = List.of("0000:8a:00.0", "0000:19:00.0");
        assertEquals(450_000, RingPlanner.hopCosts(t, busIds).bandwidth(0, 1));
        assertEquals("0 -> 1 -> 0", RingPlanner.plan(t, busIds, 1, RingSearch.ChannelMode.SAME, Params.defaults(), LOG).get(0).toString());
    }

    @Test
    void ranksWithoutGpusKeepRankOrder() {
        List<String> none = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            none.add(null);
        }
        assertEquals("0 -> 1 -> 2 -> 3 -> 0",
                RingPlanner.plan(Topology.empty(), none, 1, RingSearch.ChannelMode.SAME, Params.defaults(), LOG).get(0).toString());
    }
}
