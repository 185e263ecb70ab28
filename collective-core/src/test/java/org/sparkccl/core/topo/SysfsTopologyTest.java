package org.sparkccl.core.topo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class SysfsTopologyTest {
    private static final double GEN3_X16 = 8.0 * 16 * 128 / 130 / 8;

    @Test
    void cascadedDualSocketBoxHasPixPxbNodeAndSys(@TempDir Path dir) {
        List<String> gpus = SysfsFixture.dualSocketEightGpus(new SysfsFixture(dir), true);
        Topology t = SysfsReader.read(dir);

        assertEquals(gpus.stream().sorted().toList(), t.gpus().stream().map(PciDevice::busId).toList());
        assertEquals(List.of("0000:41:00.0"), t.nics().stream().map(PciDevice::busId).toList());
        assertNull(t.device("0000:30:00.0"), "a SATA controller is not part of the model");
        assertEquals(List.of(0, 1), t.numaNodes().stream().map(NumaNode::id).toList());
        assertEquals(40, t.numaNodes().get(1).cpuCount());

        String a = gpus.get(0);
        assertEquals(PathKind.PIX, t.path(a, gpus.get(1)).kind());
        assertEquals(PathKind.PXB, t.path(a, gpus.get(2)).kind());
        assertEquals(PathKind.PXB, t.path(a, gpus.get(3)).kind());
        for (int i = 4; i < 8; i++) {
            assertEquals(PathKind.SYS, t.path(a, gpus.get(i)).kind());
            assertEquals(Topology.DEFAULT_SMP_GBPS, t.path(a, gpus.get(i)).bandwidthGBps());
        }
        assertEquals(PathKind.PIX, t.path(gpus.get(6), gpus.get(7)).kind());
        assertEquals(PathKind.PXB, t.path(gpus.get(7), gpus.get(4)).kind());
        assertEquals(PathKind.NODE, t.path(a, "0000:41:00.0").kind());
        assertEquals(PathKind.SYS, t.path(gpus.get(5), "0000:41:00.0").kind());
        assertEquals(PathKind.LOC, t.path(a, a).kind());
        assertEquals(GEN3_X16, t.path(a, gpus.get(1)).bandwidthGBps(), 1e-9);
        assertEquals(t.path(a, gpus.get(2)), t.path(gpus.get(2), a));
        assertEquals(0, t.numaNodeOf(a));
        assertEquals(1, t.numaNodeOf(gpus.get(7)));
    }

    @Test
    void switchesOnSeparateHostBridgesAreNodeApart(@TempDir Path dir) {
        List<String> gpus = SysfsFixture.dualSocketEightGpus(new SysfsFixture(dir), false);
        Topology t = SysfsReader.read(dir);
        assertEquals(4, t.hostBridges().size());
        assertEquals(PathKind.PIX, t.path(gpus.get(0), gpus.get(1)).kind());
        assertEquals(PathKind.NODE, t.path(gpus.get(0), gpus.get(2)).kind());
        assertEquals(PathKind.NODE, t.path(gpus.get(5), gpus.get(7)).kind());
        assertEquals(PathKind.SYS, t.path(gpus.get(3), gpus.get(4)).kind());
    }

    @Test
    void gpusOnRootPortsOfOneHostBridgeArePhb(@TempDir Path dir) {
        SysfsFixture f = new SysfsFixture(dir).hostBridge("pci0000:00");
        f.bridge("pci0000:00", "0000:00:01.0", 0).gpu("0000:00:01.0", "0000:01:00.0", 0);
        f.bridge("pci0000:00", "0000:00:02.0", 0).gpu("0000:00:02.0", "0000:02:00.0", 0);
        assertEquals(PathKind.PHB, SysfsReader.read(dir).path("0000:01:00.0", "0000:02:00.0").kind());
    }

    @Test
    void pathBandwidthIsTheSlowestLinkAndCountsLanesNotIdleSpeed(@TempDir Path dir) {
        SysfsFixture f = new SysfsFixture(dir).hostBridge("pci0000:00");
        List<String> gpus = f.switchWithTwoGpus("pci0000:00", 0x10, 0);
        // A third GPU, idle (2.5 GT/s of 16) and seated in 8 lanes of 16.
        f.bridge("0000:10:00.0", "0000:11:18.0", 0);
        f.device("0000:11:18.0", "0000:14:00.0", 0x030000, SysfsFixture.NVIDIA, 0, "2.5 GT/s PCIe", 8,
                SysfsFixture.GEN4, 16);
        Topology t = SysfsReader.read(dir);
        PciDevice slow = t.device("0000:14:00.0");
        assertTrue(slow.linkBelowCapability());
        assertTrue(slow.linkNarrowerThanCapability());
        assertFalse(t.device(gpus.get(0)).linkBelowCapability());
        assertEquals(DeviceKind.GPU, slow.kind(), "class 0x0300 (VGA) from NVIDIA is a GPU too");
        // 16 GT/s capable but 8 lanes: 15.75 GB/s; the rest of the path is gen3 x16 (15.75): the same.
        assertEquals(16.0 * 8 * 128 / 130 / 8, new PciLink(16, 8).bandwidthGBps(), 1e-9);
        assertEquals(GEN3_X16, t.path(gpus.get(0), "0000:14:00.0").bandwidthGBps(), 1e-9);
        assertEquals(2.5 * 4 * 0.8 / 8, new PciLink(2.5, 4).bandwidthGBps(), 1e-9);
        assertNull(PciLink.parse("Unknown", "16"));
        assertNull(PciLink.parse("8.0 GT/s PCIe", "0"));
        assertEquals(new PciLink(2.5, 1), PciLink.parse("2.5 GT/s", "1"));
    }

    @Test
    void aerCountersAreReadWhereThereAreFiles(@TempDir Path dir) {
        SysfsFixture f = new SysfsFixture(dir).hostBridge("pci0000:00");
        List<String> gpus = f.switchWithTwoGpus("pci0000:00", 0x10, 0);
        f.aer(gpus.get(0), 3, 4);
        Topology t = SysfsReader.read(dir);
        PciDevice g = t.device(gpus.get(0));
        assertEquals(3L, g.aer().get("correctable.RxErr"));
        assertEquals(7L, g.aer().get("correctable.TOTAL_ERR_COR"));
        assertEquals(7L, g.aerTotal());
        assertEquals(-1L, t.device(gpus.get(1)).aerTotal());
    }

    @Test
    void aMachineWithoutGpusOrPciIsEmptyButHasItsNumaNodes(@TempDir Path dir) {
        new SysfsFixture(dir).numaNode(0, "0-1");
        Topology t = SysfsReader.read(dir);
        assertTrue(t.gpus().isEmpty());
        assertEquals(2, t.numaNodes().get(0).cpuCount());
        assertTrue(SysfsReader.read(dir.resolve("nothing-here")).devices().isEmpty());
    }

    @Test
    void topologyFileRoundTripsAndReplaysWithoutSysfs(@TempDir Path dir) throws IOException {
        Path sys = dir.resolve("sys");
        SysfsFixture f = new SysfsFixture(sys);
        List<String> gpus = SysfsFixture.dualSocketEightGpus(f, true);
        f.aer(gpus.get(0), 1, 2);
        Topology read = SysfsReader.read(sys).withNvLink(gpus.get(0), gpus.get(4), 4)
                .withNvLink(new NvLink(gpus.get(1), gpus.get(5), 2, 50));
        Path file = dir.resolve("machine.topo");
        TopologyFile.save(read, file);
        Topology replayed = TopologySource.load(dir.resolve("no-sysfs-here"), file);
        assertEquals(TopologyFile.format(read), TopologyFile.format(replayed));
        for (String a : gpus) {
            for (String b : gpus) {
                assertEquals(read.path(a, b), replayed.path(a, b));
            }
        }
        assertEquals(new TopoPath(PathKind.NVL, 100, 4), replayed.path(gpus.get(4), gpus.get(0)));
        assertEquals("NV2", replayed.path(gpus.get(1), gpus.get(5)).label());
        assertTrue(Files.readString(file).contains("aer.correctable.RxErr=1"));
    }

    @Test
    void nvlinkOnlyFileIsLaidOverSysfs(@TempDir Path dir) throws IOException {
        Path sys = dir.resolve("sys");
        SysfsFixture f = new SysfsFixture(sys).hostBridge("pci0000:00");
        List<String> gpus = f.switchWithTwoGpus("pci0000:00", 0x10, 0);
        Path file = dir.resolve("nvlink.topo");
        Files.writeString(file, "# the H200 pair\nnvlink " + gpus.get(0) + " " + gpus.get(1) + " 18\n");
        Topology t = TopologySource.load(sys, file);
        assertEquals(new TopoPath(PathKind.NVL, 450, 18), t.path(gpus.get(0), gpus.get(1)));
        assertEquals(2, t.gpus().size());

        Files.writeString(file, "nvlink " + gpus.get(0) + " 0000:99:00.0 18\n");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> TopologySource.load(sys, file));
        assertTrue(e.getMessage().contains("0000:99:00.0 is not a GPU of this topology"), e.getMessage());
        Files.writeString(file, "pci 0000:01:00.0 class=0x030200\n");
        e = assertThrows(IllegalArgumentException.class, () -> TopologyFile.read(file));
        assertTrue(e.getMessage().contains("line 1") && e.getMessage().contains("no parent="), e.getMessage());
        Files.writeString(file, "gpu 0000:01:00.0\n");
        e = assertThrows(IllegalArgumentException.class, () -> TopologyFile.read(file));
        assertTrue(e.getMessage().contains("unknown item 'gpu'"), e.getMessage());
    }
}
