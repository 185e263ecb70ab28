package org.sparkccl.core.net;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

class RecursiveDoublingTest {
    @Test
    void partnersArePairedBothWaysAndNumberLog2OfTheExchangingRanks() {
        for (int n = 2; n <= 17; n++) {
            int p = Integer.highestOneBit(n);
            int log2 = Integer.numberOfTrailingZeros(p);
            for (int pos = 0; pos < n; pos++) {
                Set<Integer> mine = RecursiveDoubling.partners(pos, n);
                for (int q : mine) {
                    assertTrue(q >= 0 && q < n && q != pos, n + " ranks: " + pos + " -> " + q);
                    assertTrue(RecursiveDoubling.partners(q, n).contains(pos), n + " ranks: " + q + " does not know " + pos);
                }
                boolean handsOver = pos < 2 * (n - p) && pos % 2 == 0;
                assertEquals(handsOver ? 1 : log2 + (pos < 2 * (n - p) ? 1 : 0), mine.size(), n + " ranks, rank " + pos);
            }
        }
        assertEquals(List.of(1, 2, 4), List.copyOf(RecursiveDoubling.partners(0, 8)));
        assertEquals(List.of(4, 1), List.copyOf(RecursiveDoubling.partners(3, 5)));
        assertEquals(List.of(0, 2, 3), List.copyOf(RecursiveDoubling.partners(1, 5)));
    }
}
