package org.sparkccl.tools.topo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.sparkccl.core.topo.PathKind;
import org.sparkccl.core.topo.Topology;
import org.sparkccl.core.topo.TopologyFile;
import picocli.CommandLine;

class TopoToolTest {

    /** Two H200-like GPUs under one PCIe switch, the second idle in 8 of its 16 lanes, AER on the first. */
    private static Path twoGpuMachine(Path dir) throws IOException {
        Path sys = dir.resolve("sys");
        write(sys.resolve("devices/system/node/node0/cpulist"), "0-7");
        write(sys.resolve("devices/system/node/node1/cpulist"), "8-15");
        Path hb = sys.resolve("devices/pci0000:00");
        Path rootPort = device(sys, hb, "0000:00:01.0", "0x060400", "0x8086", "32.0 GT/s PCIe", 16);
        Path up = device(sys, rootPort, "0000:01:00.0", "0x060400", "0x10b5", "32.0 GT/s PCIe", 16);
        Path down0 = device(sys, up, "0000:02:00.0", "0x060400", "0x10b5", "32.0 GT/s PCIe", 16);
        Path down1 = device(sys, up, "0000:02:01.0", "0x060400", "0x10b5", "32.0 GT/s PCIe", 16);
        Path gpu0 = device(sys, down0, "0000:03:00.0", "0x030200", "0x10de", "32.0 GT/s PCIe", 16);
        Path gpu1 = device(sys, down1, "0000:04:00.0", "0x030200", "0x10de", "2.5 GT/s PCIe", 8);
        write(gpu0.resolve("aer_dev_correctable"), "RxErr 5\nBadTLP 0\nTOTAL_ERR_COR 5");
        write(gpu0.resolve("aer_dev_fatal"), "DLP 0\nTOTAL_ERR_FATAL 0");
        write(gpu1.resolve("max_link_width"), "16");
        return sys;
    }

    private static Path device(Path sys, Path parent, String busId, String cls, String vendor, String speed, int width)
            throws IOException {
        Path dir = parent.resolve(busId);
        write(dir.resolve("class"), cls);
        write(dir.resolve("vendor"), vendor);
        write(dir.resolve("device"), "0x2335");
        write(dir.resolve("numa_node"), "1");
        write(dir.resolve("current_link_speed"), speed);
        write(dir.resolve("current_link_width"), Integer.toString(width));
        write(dir.resolve("max_link_speed"), "32.0 GT/s PCIe");
        write(dir.resolve("max_link_width"), Integer.toString(width));
        Path link = sys.resolve("bus/pci/devices").resolve(busId);
        Files.createDirectories(link.getParent());
        Files.createSymbolicLink(link, link.getParent().relativize(dir));
        return dir;
    }

    private static void write(Path file, String text) throws IOException {
        Files.createDirectories(file.getParent());
        Files.writeString(file, text + "\n");
    }

    private record Run(int code, String out, String err) {
    }

    private static Run run(String... args) {
        CommandLine cmd = TopoTool.commandLine();
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        cmd.setOut(new PrintWriter(out));
        cmd.setErr(new PrintWriter(err));
        int code = cmd.execute(args);
        return new Run(code, out.toString(), err.toString());
    }

    @Test
    void showsTheMachineItsNvLinkAndTheRingAndSavesIt(@TempDir Path dir) throws IOException {
        Path sys = twoGpuMachine(dir);
        Path nvlink = dir.resolve("nvlink.topo");
        Files.writeString(nvlink, "nvlink 0000:03:00.0 0000:04:00.0 18\n");
        Path saved = dir.resolve("saved.topo");
        Run r = run("--sysfs", sys.toString(), "--topo-file", nvlink.toString(), "--save", saved.toString(),
                "--shm", dir.toString());
        assertEquals(0, r.code, r.err);
        String o = r.out;
        assertTrue(o.contains("GPUs: 2"), o);
        assertTrue(o.contains("GPU0  0000:03:00.0") && o.contains("link 32 GT/s x16 (its maximum)"), o);
        assertTrue(o.contains("LINK BELOW CAPABILITY: running at 2.5 GT/s x8 of 32 GT/s x16 (fewer lanes"), o);
        assertTrue(o.contains("pci0000:00 host bridge, NUMA 1"), o);
        assertTrue(o.contains("      0000:01:00.0 bridge  32 GT/s x16"), o);
        assertTrue(o.contains("GPU0 - GPU1  18 links x 25 GB/s = 450 GB/s per direction"), o);
        assertTrue(o.contains("node1  CPUs 8-15 (8)"), o);
        assertTrue(o.contains("0000:03:00.0 GPU0   correctable=5, fatal=0  correctable.RxErr=5"), o);
        assertTrue(o.contains("  WARN GPU 0000:03:00.0: AER counters non-zero since boot (correctable.RxErr=5, total 5)"), o);
        assertTrue(o.contains("  WARN GPU 0000:04:00.0: PCIe link runs at 2.5 GT/s x8"), o);
        assertTrue(o.contains(dir + ": size "), o);
        assertTrue(o.contains("  GPU0  X     NV18  8-15            1"), o);
        assertTrue(o.contains("  Ring 00 : 0 -> 1 -> 0   [NV18 450, NV18 450 GB/s; slowest 450 GB/s]"), o);
        assertTrue(o.contains("  Ring 01 : 0 -> 1 -> 0"), o);

        Topology replayed = TopologyFile.read(saved);
        assertEquals(PathKind.NVL, replayed.path("0000:03:00.0", "0000:04:00.0").kind());
        Run again = run("--sysfs", dir.resolve("elsewhere").toString(), "--topo-file", saved.toString(), "--shm", dir.toString());
        assertEquals(0, again.code, again.err);
        assertEquals(o.substring(o.indexOf("\nGPUs:"), o.indexOf("\nSaved to")),
                again.out.substring(again.out.indexOf("\nGPUs:")), "the saved topology shows the same machine");
    }

    @Test
    void withoutNvLinkTheGpusArePixApart(@TempDir Path dir) throws IOException {
        Run r = run("--sysfs", twoGpuMachine(dir).toString(), "--shm", dir.toString());
        assertEquals(0, r.code, r.err);
        assertTrue(r.out.contains("  GPU1  PIX   X "), r.out);
        assertTrue(r.out.contains("none known (sysfs cannot show NVLink"), r.out);
    }

    @Test
    void aMachineWithoutGpusStillReportsCpusAndShm(@TempDir Path dir) throws IOException {
        write(dir.resolve("devices/system/node/node0/cpulist"), "0-1");
        Run r = run("--sysfs", dir.toString(), "--shm", dir.toString());
        assertEquals(0, r.code, r.err);
        assertTrue(r.out.contains("GPUs: 0"), r.out);
        assertTrue(r.out.contains("node0  CPUs 0-1 (2)"), r.out);
        assertTrue(r.out.contains("no AER files"), r.out);
        assertTrue(r.out.contains("Rings: no GPUs"), r.out);
        assertTrue(r.out.contains(dir + ": size "), r.out);
        Run missing = run("--sysfs", dir.toString(), "--shm", dir.resolve("no-shm").toString());
        assertTrue(missing.out.contains("not available"), missing.out);
    }

    @Test
    void aBadTopologyFileIsOneClearError(@TempDir Path dir) throws IOException {
        Path bad = dir.resolve("bad.topo");
        Files.writeString(bad, "nvlink 0000:03:00.0 0000:09:00.0 18\n");
        Run r = run("--sysfs", twoGpuMachine(dir).toString(), "--topo-file", bad.toString());
        assertEquals(1, r.code);
        assertTrue(r.err.startsWith("sparkccl-topo: topology file " + bad), r.err);
        assertTrue(r.err.contains("0000:09:00.0 is not a GPU of this topology"), r.err);
    }
}
