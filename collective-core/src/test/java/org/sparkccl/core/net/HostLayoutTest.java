package org.sparkccl.core.net;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import org.junit.jupiter.api.Test;
import org.sparkccl.core.transport.RankInfo;

/** The layout every rank derives from the round's descriptions: hosts by lowest rank, ranks in order. */
class HostLayoutTest {
    private static RankInfo[] ranksOn(String... hosts) {
        RankInfo[] all = new RankInfo[hosts.length];
        for (int r = 0; r < hosts.length; r++) {
            all[r] = new RankInfo(r, hosts.length, hosts[r], 100 + r, 1, Map.of());
        }
        return all;
    }

    @Test
    void interleavedRanksGroupByHostInOrderOfTheirLowestRank() {
        HostLayout layout = HostLayout.of(ranksOn("b", "a", "b", "a", "b", "a"));
        assertEquals(2, layout.hosts());
        assertTrue(layout.even());
        assertEquals(3, layout.perHost());
        assertArrayEquals(new int[][] {{0, 2, 4}, {1, 3, 5}}, layout.byHost());
        assertArrayEquals(new int[] {1, 2}, layout.place(5), "rank 5 is host 1's third rank");
        assertArrayEquals(new int[] {2, 3}, layout.crossGroup(1), "local index 1 of every host");
        assertEquals("host 0: [0, 2, 4], host 1: [1, 3, 5]", layout.toString());
    }

    @Test
    void unevenHostsAreTold() {
        HostLayout layout = HostLayout.of(ranksOn("a", "a", "b"));
        assertFalse(layout.even());
        assertArrayEquals(new int[][] {{0, 1}, {2}}, layout.byHost());
    }

    @Test
    void eachRankAloneIsOneRingOverEveryRank() {
        HostLayout alone = HostLayout.eachRankAlone(3);
        assertTrue(alone.even());
        assertEquals(1, alone.perHost());
        assertArrayEquals(new int[] {0, 1, 2}, alone.crossGroup(0));
    }
}
