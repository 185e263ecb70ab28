package org.sparkccl.tools.perf;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

class CallStatsTest {
    @Test
    void minMedianP90AndMaxOfTheCallsInAnyOrder() {
        long[] ns = new long[10];
        for (int i = 0; i < ns.length; i++) {
            ns[i] = (10 - i) * 1000L; // 10, 9, ..., 1 us
        }
        ns[3] = 500_000; // one call that lost its core (7 us gone): sorted 1 2 3 4 5 6 8 9 10 500
        // One stall: (500 - 6) us over 10 calls adds 49.4 us to the average.
        assertEquals("# calls rank 1 4096 B in-place: min 1.0 median 6.0 p90 10.0 max 500.0 us; 1 stalls (> 10x median)"
                        + " add 49.40 us to the average",
                CallStats.describe(1, 4096, true, ns));
    }
}
