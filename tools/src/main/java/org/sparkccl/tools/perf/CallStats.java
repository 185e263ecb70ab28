package org.sparkccl.tools.perf;

import java.util.Arrays;
import java.util.Locale;

/**
 * The spread of one row's calls on one rank (allreduce-perf --call-stats). The table's time is the
 * average, as nccl-tests prints it; on a shared machine a few calls that lost their core for a time
 * slice can make the average several times the median, and this line shows which happened.
 * Percentiles by nearest rank: the median is the (n/2 + 1)-th smallest call, p90 the ceil(0.9 n)-th.
 * Stalls: the calls that took over 10 times the median, and what they added to the row's average
 * beyond the median (the sum of their excess over the median, divided by the number of calls).
 */
final class CallStats {
    private CallStats() {
    }

    static String describe(int rank, long bytes, boolean inPlace, long[] callNs) {
        long[] sorted = callNs.clone();
        Arrays.sort(sorted);
        int n = sorted.length;
        long median = sorted[n / 2];
        int stalls = 0;
        long excess = 0;
        for (long ns : sorted) {
            if (ns > 10 * median) {
                stalls++;
                excess += ns - median;
            }
        }
        return String.format(Locale.ROOT,
                "# calls rank %d %d B %s: min %.1f median %.1f p90 %.1f max %.1f us; %d stalls (> 10x median) add %.2f us"
                        + " to the average",
                rank, bytes, inPlace ? "in-place" : "out-of-place", sorted[0] / 1e3, median / 1e3,
                sorted[Math.min(n - 1, (int) Math.ceil(n * 0.9) - 1)] / 1e3, sorted[n - 1] / 1e3, stalls,
                excess / 1e3 / n);
    }
}
