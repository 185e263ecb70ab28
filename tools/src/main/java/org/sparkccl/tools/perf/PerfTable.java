package org.sparkccl.tools.perf;

import java.io.PrintStream;
import java.math.BigDecimal;
import java.math.MathContext;
import java.util.Locale;

/**
 * The text nccl-tests prints, column for column, so that tools and eyes trained on
 * {@code all_reduce_perf} read ours the same way: the column header with out-of-place and in-place
 * groups, one row per size, and the footer with the out-of-bounds count and the average bus
 * bandwidth (over every row and both placements).
 */
final class PerfTable {
    /** One placement (out-of-place or in-place) of one row. */
    static final class Measurement {
        final double timeUs;
        final double algBw;
        final double busBw;
        /** Elements out of tolerance, summed over ranks; -1 when not checked (printed as N/A). */
        final long wrong;

        Measurement(double timeUs, long bytes, int ranks, long wrong) {
            this.timeUs = timeUs;
            // GB/s = bytes per microsecond / 1000. The ring moves 2(n-1)/n of the data over each link.
            this.algBw = timeUs > 0 ? bytes / timeUs / 1e3 : 0;
            this.busBw = algBw * busFactor(ranks);
            this.wrong = wrong;
        }
    }

    private final PrintStream out;
    private double busBwSum;
    private int busBwCount;
    private int failedMeasurements;

    PerfTable(PrintStream out) {
        this.out = out;
    }

    /** AllReduce's bus bandwidth factor, as nccl-tests: 2(n-1)/n. */
    static double busFactor(int ranks) {
        return 2.0 * (ranks - 1) / ranks;
    }

    void printColumnHeader() {
        out.println("#");
        out.printf(Locale.ROOT, "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          %n",
                "", "", "", "", "");
        out.printf(Locale.ROOT, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s%n",
                "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
                "time", "algbw", "busbw", "#wrong");
        out.printf(Locale.ROOT, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s%n",
                "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
    }

    void printRow(long bytes, long count, String type, String op, int root, Measurement outOfPlace, Measurement inPlace) {
        StringBuilder line = new StringBuilder(String.format(Locale.ROOT, "%12d  %12d  %8s  %6s  %6d",
                bytes, count, type, op, root));
        for (Measurement m : new Measurement[] {outOfPlace, inPlace}) {
            line.append(String.format(Locale.ROOT, "  %7s  %6s  %6s  %6s", number(m.timeUs, 7), number(m.algBw, 6),
                    number(m.busBw, 6), m.wrong < 0 ? "N/A" : Long.toString(m.wrong)));
            busBwSum += m.busBw;
            busBwCount++;
            if (m.wrong > 0) {
                failedMeasurements++;
            }
        }
        out.println(line);
        out.flush();
    }

    /** Measurements (row and placement) with wrong elements: nccl-tests' "out of bounds values". */
    int failedMeasurements() {
        return failedMeasurements;
    }

    double averageBusBandwidth() {
        return busBwCount == 0 ? 0 : busBwSum / busBwCount;
    }

    void printFooter() {
        out.printf(Locale.ROOT, "# %-20s : %d %s%n", "Out of bounds values", failedMeasurements,
                failedMeasurements == 0 ? "OK" : "FAILED");
        out.printf(Locale.ROOT, "# %-20s : %s %n", "Avg bus bandwidth", general(averageBusBandwidth()));
        out.println("#");
        out.flush();
    }

    /**
     * A number in {@code width} columns with as many decimals as fit (2, 1, 0, then exponent form),
     * as nccl-tests' getFloatStr.
     */
    static String number(double value, int width) {
        int power = 0;
        for (double v = 1; value >= v; v *= 10) {
            power++;
        }
        String format;
        if (power < width - 2) {
            format = "%" + width + ".2f";
        } else if (power < width - 1) {
            format = "%" + width + ".1f";
        } else if (power < width + 1) {
            format = "%" + width + ".0f";
        } else {
            format = "%" + width + ".1e";
        }
        return String.format(Locale.ROOT, format, value);
    }

    /** C's {@code %g}: six significant digits, trailing zeros dropped, exponent form below 1e-4 and from 1e6. */
    static String general(double value) {
        if (value == 0 || !Double.isFinite(value)) {
            return value == 0 ? "0" : Double.toString(value);
        }
        BigDecimal rounded = new BigDecimal(value).round(new MathContext(6));
        int exponent = rounded.precision() - rounded.scale() - 1;
        if (exponent < -4 || exponent >= 6) {
            String[] parts = String.format(Locale.ROOT, "%.5e", rounded.doubleValue()).split("e");
            String mantissa = parts[0].contains(".") ? parts[0].replaceAll("0+$", "").replaceAll("\\.$", "") : parts[0];
            return mantissa + "e" + parts[1];
        }
        return rounded.stripTrailingZeros().toPlainString();
    }
}
