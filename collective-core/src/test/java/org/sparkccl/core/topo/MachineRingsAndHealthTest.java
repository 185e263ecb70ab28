package org.sparkccl.core.topo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.sparkccl.core.log.CclLog;
import org.sparkccl.core.param.Params;

/**
 * For each machine shape of issue 17: the ring the planner chooses is the one brute force finds, and
 * the link-health warnings are exactly the expected ones.
 */
class MachineRingsAndHealthTest {
    private static final double GEN3_X8 = 8.0 * 8 * 128 / 130 / 8;
    private static final Params AVOID_OFF = Params.defaults().withOverrides(Map.of("SPARKCCL_AVOID_SLOW_LINKS", "0"));

    /** Plans one ring and checks it against brute force over the same hop costs. */
    private static Ring planOptimal(Topology t, List<String> busIds, Params params) {
        Ring ring = RingPlanner.plan(t, busIds, 1, RingSearch.ChannelMode.SAME, params, new CclLog(0, params)).get(0);
        HopCosts costs = RingPlanner.hopCosts(t, busIds, params.get(Params.AVOID_SLOW_LINKS));
        Ring brute = RingSearchTest.bruteForce(costs);
        assertEquals(RingScore.of(costs, brute.order()), RingScore.of(costs, ring.order()), ring + " vs " + brute);
        assertEquals(brute, ring, "ties go to the lexicographically smallest order");
        return ring;
    }

    static List<String> scrambled(List<String> gpus) {
        List<String> out = new ArrayList<>();
        for (int g : new int[] {0, 4, 2, 6, 1, 7, 3, 5}) {
            out.add(gpus.get(g));
        }
        return out;
    }

    @ParameterizedTest(name = "cascaded switches: {0}")
    @ValueSource(booleans = {true, false})
    void dualSocketEightGpusTwoSwitchesPerSocket(boolean cascaded, @TempDir Path dir) {
        SysfsFixture f = new SysfsFixture(dir);
        List<String> gpus = SysfsFixture.dualSocketEightGpus(f, cascaded);
        Topology t = SysfsReader.read(dir);
        planOptimal(t, scrambled(gpus), Params.defaults());
        assertEquals(List.of(), LinkHealth.warnings(t));

        f.aer(gpus.get(3), 5, 0);
        List<String> w = LinkHealth.warnings(SysfsReader.read(dir));
        assertEquals(1, w.size(), w.toString());
        assertTrue(w.get(0).startsWith("GPU " + gpus.get(3) + ": AER counters non-zero since boot (correctable.RxErr=5,"
                + " total 5)"), w.get(0));
        assertTrue(w.get(0).contains("check the slot and the cabling"), w.get(0));
    }

    @Test
    void fourGpusBehindOneSwitch(@TempDir Path dir) {
        List<String> gpus = SysfsFixture.fourGpusBehindOneSwitch(new SysfsFixture(dir), SysfsFixture.GEN4);
        Topology t = SysfsReader.read(dir);
        Ring ring = planOptimal(t, List.of(gpus.get(2), gpus.get(0), gpus.get(3), gpus.get(1)), Params.defaults());
        assertEquals("0 -> 1 -> 2 -> 3 -> 0", ring.toString(), "all hops PIX alike: rank order");
        assertEquals(new RingScore(31_508, 4 * 31_508, 4 * PathKind.PIX.ordinal()),
                RingScore.of(RingPlanner.hopCosts(t, gpus), ring.order()));
        assertEquals(List.of(), LinkHealth.warnings(t));
    }

    @Test
    void eightGpuNvSwitchBoxFromATopologyFile(@TempDir Path dir) throws IOException {
        Path sys = dir.resolve("sys");
        List<String> gpus = SysfsFixture.dualSocketEightGpus(new SysfsFixture(sys), false);
        StringBuilder file = new StringBuilder("# every GPU pair through the NVSwitches\n");
        for (int i = 0; i < 8; i++) {
            for (int j = i + 1; j < 8; j++) {
                file.append("nvlink ").append(gpus.get(i)).append(' ').append(gpus.get(j)).append(" 18\n");
            }
        }
        Path topo = dir.resolve("hgx.topo");
        Files.writeString(topo, file.toString());
        Topology t = TopologySource.load(sys, topo);
        Ring ring = planOptimal(t, scrambled(gpus), Params.defaults());
        assertEquals("0 -> 1 -> 2 -> 3 -> 4 -> 5 -> 6 -> 7 -> 0", ring.toString());
        assertEquals(List.of(), LinkHealth.warnings(t));
    }

    /** The held-out case of issue 17: one Gen4 x16 GPU of the dual-socket box trained down to 8 GT/s x8. */
    @Test
    void dualSocketBoxWithOneGpuTrainedDown(@TempDir Path dir) {
        SysfsFixture f = new SysfsFixture(dir);
        List<String> gpus = SysfsFixture.dualSocketEightGpus(f, true);
        String slow = gpus.get(5);
        f.link(slow, SysfsFixture.GEN3, 8, SysfsFixture.GEN4, 16);
        Topology t = SysfsReader.read(dir);
        assertEquals(GEN3_X8, t.path(slow, gpus.get(4)).bandwidthGBps(), 1e-9);
        List<String> busIds = scrambled(gpus);
        Ring ring = planOptimal(t, busIds, Params.defaults());
        assertEquals(HopCosts.toMBps(GEN3_X8), RingScore.of(RingPlanner.hopCosts(t, busIds), ring.order()).slowestMBps());

        List<String> w = LinkHealth.warnings(t);
        assertEquals(List.of("GPU " + slow + ": PCIe link runs at 8 GT/s x8 (7.88 GB/s), below its capability of"
                + " 16 GT/s x16 (31.51 GB/s); rings count it at the lower rate. Likely fix: reseat the card, check the"
                + " riser, check the BIOS bifurcation setting of its slot (lanes), check the BIOS PCIe speed"
                + " (generation) setting of its slot"), w);
    }

    /**
     * Four Gen5 GPUs behind one switch; GPU 2 trained at Gen4 (31.5 GB/s of 63) and bridged by NVLink
     * (2 links, 50 GB/s) to GPUs 1 and 3. Costed right, the ring reaches GPU 2 over its two NVLinks only
     * and never crosses its slow PCIe link; costed at capable speed, it takes GPU 2's PCIe link for the
     * larger sum.
     */
    @Test
    void theRingAvoidsASlowLinkWhereAnotherOrderCan(@TempDir Path dir) {
        SysfsFixture f = new SysfsFixture(dir);
        List<String> gpus = SysfsFixture.fourGpusBehindOneSwitch(f, SysfsFixture.GEN5);
        f.link(gpus.get(2), SysfsFixture.GEN4, 16, SysfsFixture.GEN5, 16);
        Topology t = SysfsReader.read(dir).withNvLink(gpus.get(1), gpus.get(2), 2).withNvLink(gpus.get(2), gpus.get(3), 2);

        Ring avoided = planOptimal(t, gpus, Params.defaults());
        assertEquals("0 -> 1 -> 2 -> 3 -> 0", avoided.toString());
        assertEquals("Ring 00 : 0 -> 1 -> 2 -> 3 -> 0   [PIX 63.02, NV2 50, NV2 50, PIX 63.02 GB/s; slowest 50 GB/s]",
                RingPlanner.ringLine(0, avoided, t, gpus, Params.defaults()));

        Ring shapeOnly = planOptimal(t, gpus, AVOID_OFF);
        assertEquals("0 -> 1 -> 3 -> 2 -> 0", shapeOnly.toString());
        assertEquals(PathKind.PIX, t.path(gpus.get(2), gpus.get(0)).kind(), "this ring crosses GPU 2's slow link");
        assertEquals(1, LinkHealth.warnings(t).size());
    }

    @Test
    void theH200PairIdleOrBusy(@TempDir Path dir) {
        SysfsFixture f = new SysfsFixture(dir);
        List<String> gpus = SysfsFixture.h200Pair(f);
        Topology t = SysfsReader.read(dir).withNvLink(gpus.get(0), gpus.get(1), 18);
        assertEquals("0 -> 1 -> 0", planOptimal(t, gpus, Params.defaults()).toString());
        assertEquals(List.of(), LinkHealth.warnings(t));

        // An idle H200 drops to 2.5 GT/s: power saving, no warning, and its PCIe path still counts at Gen5.
        // The root port sees the same link, so it reports 2.5 GT/s too.
        f.link(gpus.get(1), "2.5 GT/s PCIe", 16, SysfsFixture.GEN5, 16);
        f.link("0000:80:01.0", "2.5 GT/s PCIe", 16, SysfsFixture.GEN5, 16);
        Topology idle = SysfsReader.read(dir);
        assertEquals(List.of(), LinkHealth.warnings(idle));
        assertEquals(32.0 * 16 * 128 / 130 / 8, idle.path(gpus.get(0), gpus.get(1)).bandwidthGBps(), 1e-9);
        assertEquals("0 -> 1 -> 0", planOptimal(idle.withNvLink(gpus.get(0), gpus.get(1), 18), gpus,
                Params.defaults()).toString());
    }
}
