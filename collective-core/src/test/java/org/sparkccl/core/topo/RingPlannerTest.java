package org.sparkccl.core.topo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.sparkccl.core.log.CclLog;
import org.sparkccl.core.param.Params;

/** The planner's settings: SPARKCCL_RINGS, SPARKCCL_TOPO_FILE, and the ring line it logs. */
class RingPlannerTest {
    private static final List<String> NO_GPUS = java.util.Arrays.asList(null, null, null, null);

    private static Params with(String name, String value) {
        return Params.defaults().withOverrides(Map.of(name, value));
    }

    private static List<Ring> plan(Params p, int channels) {
        return RingPlanner.plan(Topology.empty(), NO_GPUS, channels, RingSearch.ChannelMode.SPREAD, p, new CclLog(0, p));
    }

    @Test
    void forcedRingsReplaceTheSearchAndRepeatOverChannels() {
        List<Ring> rings = plan(with("SPARKCCL_RINGS", "0 1 3 2|0 2 3 1"), 3);
        assertEquals(List.of("0 -> 1 -> 3 -> 2 -> 0", "0 -> 2 -> 3 -> 1 -> 0", "0 -> 1 -> 3 -> 2 -> 0"),
                rings.stream().map(Ring::toString).toList());
        // NCCL's dash form, and a ring that does not start at rank 0.
        assertEquals("2 -> 0 -> 3 -> 1 -> 2", plan(with("SPARKCCL_RINGS", " 2-0-3-1 "), 1).get(0).toString());
        // Unset: the search (rank order, as ranks without GPUs all look alike).
        assertEquals("0 -> 1 -> 2 -> 3 -> 0", plan(Params.defaults(), 1).get(0).toString());
    }

    @Test
    void badForcedRingsAreRefusedNamingTheRing() {
        assertBad("0 1 3 2|0 1 1 2", "ring 1 ('0 1 1 2') names rank 1 twice");
        assertBad("0 1 3 2|0 1 2", "ring 1 ('0 1 2') leaves out rank 3");
        assertBad("0 1 4 2", "ring 0 ('0 1 4 2') names rank 4, but the communicator has ranks 0..3");
        assertBad("0 1 3 2|0 x 3 1", "ring 1 ('0 x 3 1') has 'x', which is not a rank number");
        assertBad("0 1 3 2||0 2 3 1", "ring 1 ('') is empty");
        assertBad("0 1", "ring 0 ('0 1') leaves out ranks 2, 3");
    }

    private static void assertBad(String rings, String expected) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> plan(with("SPARKCCL_RINGS", rings), 2));
        assertTrue(e.getMessage().contains(expected), e.getMessage());
        assertTrue(e.getMessage().startsWith("SPARKCCL_RINGS='" + rings + "'"), e.getMessage());
        assertTrue(e.getMessage().contains("unset it"), e.getMessage());
    }

    @Test
    void theLibrarysTopologySourceHonoursTheTopoFile(@TempDir Path dir) {
        Path sys = dir.resolve("sys");
        SysfsFixture f = new SysfsFixture(sys).numaNode(0, "0-7").hostBridge("pci0000:00");
        List<String> gpus = f.switchWithTwoGpus("pci0000:00", 0x10, 0);
        Path file = dir.resolve("saved.topo");
        TopologyFile.save(SysfsReader.read(sys).withNvLink(gpus.get(0), gpus.get(1), 18), file);
        // The library reads /sys; a whole saved topology replaces it, so the GPUs of the fixture appear.
        Topology t = TopologySource.load(with("SPARKCCL_TOPO_FILE", file.toString()));
        assertEquals(gpus, t.gpus().stream().map(PciDevice::busId).toList());
        assertEquals("NV18", t.path(gpus.get(0), gpus.get(1)).label());
    }

    @Test
    void theRingLineNamesEachHopsKindAndBandwidth(@TempDir Path dir) {
        SysfsFixture f = new SysfsFixture(dir).numaNode(0, "0-7").hostBridge("pci0000:00");
        List<String> gpus = f.switchWithTwoGpus("pci0000:00", 0x10, 0);
        f.bridge("pci0000:00", "0000:00:02.0", 0).gpu("0000:00:02.0", "0000:40:00.0", 0);
        Topology t = SysfsReader.read(dir);
        List<String> busIds = List.of(gpus.get(0), "0000:40:00.0", gpus.get(1));
        Ring ring = new Ring(new int[] {0, 2, 1});
        assertEquals("Ring 01 : 0 -> 2 -> 1 -> 0   [PIX 15.75, PHB 15.75, PHB 15.75 GB/s; slowest 15.75 GB/s]",
                RingPlanner.ringLine(1, ring, t, busIds, Params.defaults()));
        assertEquals("Ring 00 : 0 -> 0", RingPlanner.ringLine(0, new Ring(new int[] {0}), t, List.of(gpus.get(0)),
                Params.defaults()));
    }
}
