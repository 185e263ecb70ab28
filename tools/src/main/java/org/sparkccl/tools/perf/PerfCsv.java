package org.sparkccl.tools.perf;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;

/** The benchmark's rows as CSV, one line per size, for plots and comparisons (e.g. against MPI). */
final class PerfCsv implements AutoCloseable {
    static final String HEADER = "size_bytes,count,type,redop,root,"
            + "oop_time_us,oop_algbw_gbps,oop_busbw_gbps,oop_wrong,"
            + "ip_time_us,ip_algbw_gbps,ip_busbw_gbps,ip_wrong,ranks,settings";

    private final Path file;
    private final PrintWriter writer;

    PerfCsv(Path file) {
        this.file = file;
        try {
            this.writer = new PrintWriter(Files.newBufferedWriter(file, StandardCharsets.UTF_8));
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write the CSV file " + file + ": " + e.getMessage(), e);
        }
        writer.println(HEADER);
    }

    void row(long bytes, long count, String type, String op, int root, PerfTable.Measurement outOfPlace,
             PerfTable.Measurement inPlace, int ranks, String settings) {
        writer.printf(Locale.ROOT, "%d,%d,%s,%s,%d,%s,%s,%d,\"%s\"%n", bytes, count, type, op, root,
                fields(outOfPlace), fields(inPlace), ranks, settings);
        writer.flush();
    }

    private static String fields(PerfTable.Measurement m) {
        return String.format(Locale.ROOT, "%.3f,%.4f,%.4f,%s", m.timeUs, m.algBw, m.busBw,
                m.wrong < 0 ? "" : Long.toString(m.wrong));
    }

    @Override
    public void close() {
        writer.close();
        if (writer.checkError()) {
            throw new UncheckedIOException(new IOException("writing the CSV file " + file + " failed"));
        }
    }
}
