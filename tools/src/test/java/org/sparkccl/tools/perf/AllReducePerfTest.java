package org.sparkccl.tools.perf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

class AllReducePerfTest {

    @Test
    void takesNcclTestsFlags() {
        AllReducePerf perf = new AllReducePerf();
        new CommandLine(perf).parseArgs("-b", "1K", "-e", "16M", "-f", "4", "-g", "4", "-n", "5", "-w", "2", "-c", "0",
                "-d", "half", "-o", "max", "-i", "64K", "--proto", "LL", "--channels", "2", "--transport", "shm",
                "--algo", "OneShot");
        assertEquals(1024, perf.minBytes);
        assertEquals(16 << 20, perf.maxBytes);
        assertEquals(4, perf.stepFactor);
        assertEquals(64 << 10, perf.stepBytes);
        assertEquals(4, perf.ranks);
        assertEquals(5, perf.iters);
        assertEquals(2, perf.warmupIters);
        assertEquals(0, perf.checkIters);
        assertEquals("half", perf.datatype);
        assertEquals("max", perf.op);
        assertEquals("LL", perf.proto);
        assertEquals(2, perf.channels);
        assertEquals("shm", perf.transport);
        assertEquals("OneShot", perf.algo);
    }

    @Test
    void unavailableDeviceAndTransportFailWithAClearMessage() {
        if (org.sparkccl.core.engine.Engines.gpuUnavailableReason() != null) {
            // No usable GPU here (CI, development machines): the reason, and what to use instead.
            Run gpu = run("--device", "gpu");
            assertEquals(2, gpu.code);
            assertTrue(gpu.err.contains("--device gpu: ") && gpu.err.contains("use --device cpu"), gpu.err);
        }
        Run pretend = run("-g", "2", "--transport", "shm", "--pretend-hosts", "2");
        assertEquals(2, pretend.code);
        assertTrue(pretend.err.contains("--pretend-hosts needs --transport auto or socket"), pretend.err);
        Run perGpu = run("--device", "cpu", "--ranks-per-gpu", "2");
        assertEquals(2, perGpu.code);
        assertTrue(perGpu.err.contains("--ranks-per-gpu needs --device gpu"), perGpu.err);
        Run algo = run("--algo", "tree");
        assertEquals(2, algo.code);
        assertTrue(algo.err.contains("--algo takes Ring, OneShot, Direct or auto, got 'tree'"), algo.err);
        Run type = run("-d", "complex");
        assertEquals(2, type.code);
        assertTrue(type.err.contains("unknown data type 'complex'"), type.err);        Run queued = run("--device", "cpu", "-z", "0");
        assertEquals(2, queued.code);
        assertTrue(queued.err.contains("-z 0 queues calls on a CUDA stream: it needs --device gpu"), queued.err);
        Run blocking = run("-z", "2");
        assertEquals(2, blocking.code);
        assertTrue(blocking.err.contains("-z takes 0 or 1, got 2"), blocking.err);
    }

    @Test
    void tableRowsForEverySizeWithCheckCsvAndPlot(@TempDir Path dir) throws IOException {
        Path csv = dir.resolve("perf.csv");
        Path plot = dir.resolve("plots/perf.png");
        Run r = run("-g", "2", "-b", "1K", "-e", "8K", "-f", "2", "-n", "3", "-w", "1", "-c", "1", "--csv", csv.toString(),
                "--plot", plot.toString());
        assertEquals(0, r.code, r.err);
        assertTrue(r.out.startsWith("# nThread 1 nGpus 2 minBytes 1024 maxBytes 8192 step: 2(factor) warmup iters: 1 iters: 3"),
                r.out);
        assertTrue(r.out.contains("#  Rank  0 Group  0 Pid "), r.out);
        assertTrue(r.out.contains("#  Rank  1 Group  0 Pid "), r.out);
        assertTrue(r.out.contains("#       size         count      type   redop    root     time   algbw   busbw  #wrong"), r.out);
        List<String[]> rows = rows(r.out);
        assertEquals(List.of("1024", "2048", "4096", "8192"), rows.stream().map(c -> c[0]).collect(Collectors.toList()));
        for (String[] row : rows) {
            assertEquals(13, row.length, Arrays.toString(row));
            assertEquals(Long.parseLong(row[0]) / 4, Long.parseLong(row[1]));
            assertEquals(List.of("float", "sum", "-1"), List.of(row[2], row[3], row[4]));
            assertEquals("0", row[8]);
            assertEquals("0", row[12]);
            // busbw = algbw * 2(n-1)/n = algbw for 2 ranks
            assertEquals(row[6], row[7]);
        }
        assertTrue(r.out.contains("# Out of bounds values : 0 OK"), r.out);
        assertTrue(r.out.contains("# Avg bus bandwidth    : "), r.out);
        List<String> csvLines = Files.readAllLines(csv);
        assertEquals(PerfCsv.HEADER, csvLines.get(0));
        assertEquals(5, csvLines.size(), csvLines.toString());
        assertTrue(csvLines.get(1).startsWith("1024,256,float,sum,-1,"), csvLines.get(1));
        assertTrue(r.out.contains("# plot: " + plot), r.out);
        java.awt.image.BufferedImage image = javax.imageio.ImageIO.read(plot.toFile());
        assertEquals(org.sparkccl.train.plot.Charts.WIDTH, image.getWidth(), "a PNG of the chart's size");
    }

    @Test
    void socketTransportBetweenTheRankProcesses() {
        Run r = run("-g", "2", "--transport", "socket", "-b", "1K", "-e", "256K", "-f", "16", "-n", "2", "-w", "1",
                "-c", "1");
        assertEquals(0, r.code, r.err);
        assertTrue(r.out.contains("transport socket (engine SocketCommunicator, 2 TCP connection(s) per neighbour)"), r.out);
        List<String[]> rows = rows(r.out);
        assertEquals(List.of("1024", "16384", "262144"), rows.stream().map(c -> c[0]).collect(Collectors.toList()));
        for (String[] row : rows) {
            assertEquals("0", row[8], Arrays.toString(row));
            assertEquals("0", row[12], Arrays.toString(row));
        }
    }

    @Test
    void sharedBuffersWithDashR() {
        Run r = run("-g", "2", "-b", "64K", "-e", "1M", "-f", "4", "-n", "3", "-w", "1", "-c", "1", "-R", "1",
                "--call-stats");
        assertEquals(0, r.code, r.err);
        assertTrue(r.out.contains("buffers shared (-R 1)"), r.out);
        assertEquals(3, rows(r.out).size(), r.out);
        assertTrue(r.out.contains("# Out of bounds values : 0 OK"), r.out);
        // --call-stats: one line per rank, size and placement (2 x 3 x 2), wherever the launcher put it.
        String all = r.out + r.err;
        long statLines = all.lines().filter(l -> l.contains("# calls rank ") && l.contains(" median ")).count();
        assertEquals(12, statLines, all);
    }

    @Test
    void rewritingTheInputBeforeEachCallKeepsEveryRowRight() {
        Run r = run("-g", "2", "-b", "64K", "-e", "1M", "-f", "4", "-n", "3", "-w", "1", "-c", "1", "-R", "1",
                "--rewrite-input");
        assertEquals(0, r.code, r.err);
        assertEquals(3, rows(r.out).size(), r.out);
        assertTrue(r.out.contains("# Out of bounds values : 0 OK"), r.out);
    }

    @Test
    void everyTypeAndOpOnThreeRanksAndOnOne() {
        Run three = run("-g", "3", "-b", "4K", "-e", "4K", "-d", "all", "-o", "all", "-n", "2", "-w", "1", "--proto", "Simple");
        assertEquals(0, three.code, three.err);
        assertEquals(40, rows(three.out).size(), three.out);
        for (String[] row : rows(three.out)) {
            assertEquals("0", row[8], Arrays.toString(row));
            assertEquals("0", row[12], Arrays.toString(row));
        }
        Run one = run("-g", "1", "-b", "1K", "-e", "4K", "-f", "4", "-d", "bfloat16", "-o", "prod", "-n", "2");
        assertEquals(0, one.code, one.err);
        assertEquals(2, rows(one.out).size(), one.out);
        assertTrue(one.out.contains("# Out of bounds values : 0 OK"), one.out);
    }

    @Test
    void numbersUseAsManyDecimalsAsFitLikeNcclTests() {
        assertEquals("  12.35", PerfTable.number(12.345, 7));
        assertEquals("12345.6", PerfTable.number(12345.6, 7));
        assertEquals("1234567", PerfTable.number(1234567, 7));
        assertEquals("1.2e+08", PerfTable.number(123456789, 7));
        assertEquals("  0.00", PerfTable.number(0, 6));
        assertEquals("1.5", PerfTable.general(1.5));
        assertEquals("0.0326307", PerfTable.general(0.03263074));
        assertEquals("9.30142e-07", PerfTable.general(0.000000930142));
        assertEquals("1.5e+06", PerfTable.general(1_500_000));
        assertEquals("25.2127", PerfTable.general(25.21271));
        assertEquals("0", PerfTable.general(0));
        assertEquals(1.5, PerfTable.busFactor(4));
        assertEquals(0.0, PerfTable.busFactor(1));
    }

    private static List<String[]> rows(String out) {
        return out.lines().filter(l -> !l.startsWith("#") && !l.isBlank()).map(l -> l.trim().split("\\s+"))
                .collect(Collectors.toList());
    }

    private static final class Run {
        int code;
        String out;
        String err;
    }

    /** Runs the tool as bin/allreduce-perf would (ranks as processes), capturing what it prints. */
    private static synchronized Run run(String... args) {
        PrintStream savedOut = System.out;
        PrintStream savedErr = System.err;
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        Run r = new Run();
        try {
            System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
            System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
            r.code = new CommandLine(new AllReducePerf()).execute(args);
        } finally {
            System.setOut(savedOut);
            System.setErr(savedErr);
        }
        r.out = out.toString(StandardCharsets.UTF_8);
        r.err = err.toString(StandardCharsets.UTF_8);
        return r;
    }
}
