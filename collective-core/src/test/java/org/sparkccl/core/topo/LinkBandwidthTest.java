package org.sparkccl.core.topo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** How a PCIe link's bandwidth is counted: generation, encoding, lanes, idle and degraded links. */
class LinkBandwidthTest {
    private static final String GPU_A = "0000:02:00.0";
    private static final String GPU_B = "0000:03:00.0";

    /**
     * Two GPUs of one generation, each behind a port of one switch, on a root port of the same
     * generation: the path between them runs at that generation's x16 rate after its encoding.
     */
    @ParameterizedTest(name = "{0} GT/s x16 -> {2} GB/s")
    @CsvSource({
        "2.5 GT/s PCIe, 2.5, 4.0",        // Gen1: 8b/10b
        "5.0 GT/s PCIe, 5.0, 8.0",        // Gen2: 8b/10b
        "8.0 GT/s PCIe, 8.0, 15.7538",    // Gen3: 128b/130b
        "16.0 GT/s PCIe, 16.0, 31.5077",  // Gen4
        "32.0 GT/s PCIe, 32.0, 63.0154",  // Gen5
        "64.0 GT/s PCIe, 64.0, 121.0",    // Gen6: FLIT mode, 242 payload bytes of 256
    })
    void eachGenerationAtFullWidth(String sysfsSpeed, double gts, double expectedGBps, @TempDir Path dir) {
        Topology t = SysfsReader.read(twoGpusOnOneSwitch(dir, sysfsSpeed, 16, sysfsSpeed, 16));
        assertEquals(new PciLink(gts, 16), t.device(GPU_A).link());
        assertFalse(t.device(GPU_A).linkBelowCapability());
        assertEquals(PathKind.PIX, t.path(GPU_A, GPU_B).kind());
        assertEquals(expectedGBps, t.path(GPU_A, GPU_B).bandwidthGBps(), 1e-3);
    }

    @Test
    void aGpuTrainedDownTo8GtsX8IsCostedAsItRuns(@TempDir Path dir) {
        // The held-out case of issue 17: a Gen4 x16 GPU trained at Gen3 x8.
        Topology t = SysfsReader.read(twoGpusOnOneSwitch(dir, SysfsFixture.GEN3, 8, SysfsFixture.GEN4, 16));
        PciDevice gpu = t.device(GPU_A);
        assertTrue(gpu.linkDegraded());
        assertFalse(gpu.linkIdleDownclocked());
        assertEquals(8.0 * 8 * 128 / 130 / 8, t.path(GPU_A, GPU_B).bandwidthGBps(), 1e-9); // 7.88 GB/s
        // The shape-only costing (SPARKCCL_AVOID_SLOW_LINKS=0) keeps the former figure: capable speed, lanes in use.
        assertEquals(16.0 * 8 * 128 / 130 / 8, t.path(GPU_A, GPU_B, false).bandwidthGBps(), 1e-9);
    }

    @Test
    void aGen5GpuTrainedAtGen4FullWidthIsDegradedToo(@TempDir Path dir) {
        Topology t = SysfsReader.read(twoGpusOnOneSwitch(dir, SysfsFixture.GEN4, 16, SysfsFixture.GEN5, 16));
        assertTrue(t.device(GPU_A).linkDegraded());
        assertEquals(16.0 * 16 * 128 / 130 / 8, t.path(GPU_A, GPU_B).bandwidthGBps(), 1e-9);
    }

    @Test
    void anIdleGpuAt2point5GtsIsCostedAtItsCapableSpeed(@TempDir Path dir) {
        Topology t = SysfsReader.read(twoGpusOnOneSwitch(dir, "2.5 GT/s PCIe", 16, SysfsFixture.GEN5, 16));
        PciDevice gpu = t.device(GPU_A);
        assertTrue(gpu.linkBelowCapability());
        assertTrue(gpu.linkIdleDownclocked());
        assertFalse(gpu.linkDegraded(), "power saving is not a fault");
        assertEquals(32.0 * 16 * 128 / 130 / 8, t.path(GPU_A, GPU_B).bandwidthGBps(), 1e-9);
    }

    @Test
    void anIdleGpuWithFewerLanesCountsItsLanesAndIsDegraded(@TempDir Path dir) {
        Topology t = SysfsReader.read(twoGpusOnOneSwitch(dir, "2.5 GT/s PCIe", 8, SysfsFixture.GEN5, 16));
        PciDevice gpu = t.device(GPU_A);
        assertTrue(gpu.linkIdleDownclocked());
        assertTrue(gpu.linkDegraded(), "lanes do not come back under load");
        assertEquals(32.0 * 8 * 128 / 130 / 8, t.path(GPU_A, GPU_B).bandwidthGBps(), 1e-9);
    }

    @Test
    void aGen1CapableLinkAt2point5IsNotIdle(@TempDir Path dir) {
        Topology t = SysfsReader.read(twoGpusOnOneSwitch(dir, "2.5 GT/s PCIe", 16, "2.5 GT/s PCIe", 16));
        assertFalse(t.device(GPU_A).linkIdleDownclocked());
        assertFalse(t.device(GPU_A).linkDegraded());
    }

    /**
     * {@code pci0000:00 / 0000:00:01.0 (root port) / 0000:01:00.0 (switch up) / 0000:01:0{8,9}.0 (down)
     * / GPU_A, GPU_B}: every link at {@code gen} x16 except GPU_A's, which runs at the given link.
     */
    private static Path twoGpusOnOneSwitch(Path dir, String gpuASpeed, int gpuAWidth, String gen, int width) {
        SysfsFixture f = new SysfsFixture(dir).numaNode(0, "0-7").hostBridge("pci0000:00");
        f.device("pci0000:00", "0000:00:01.0", 0x060400, 0x8086, 0, gen, width, gen, width);
        f.device("0000:00:01.0", "0000:01:00.0", 0x060400, 0x10b5, 0, gen, width, gen, width);
        f.device("0000:01:00.0", "0000:01:08.0", 0x060400, 0x10b5, 0, gen, width, gen, width);
        f.device("0000:01:00.0", "0000:01:09.0", 0x060400, 0x10b5, 0, gen, width, gen, width);
        f.device("0000:01:08.0", GPU_A, 0x030200, SysfsFixture.NVIDIA, 0, gpuASpeed, gpuAWidth, gen, width);
        f.device("0000:01:09.0", GPU_B, 0x030200, SysfsFixture.NVIDIA, 0, gen, width, gen, width);
        return dir;
    }
}
