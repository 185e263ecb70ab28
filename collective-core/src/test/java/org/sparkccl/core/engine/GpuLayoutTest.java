package org.sparkccl.core.engine;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.sparkccl.core.log.CclLog;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.transport.RankInfo;

/**
 * The GPU engine's layout as {@link Engines} decides it, from the round's descriptions alone (no GPU
 * needed): one host keeps the GPU communicator; even hosts run two-level over the hosts; uneven hosts
 * one ring over every rank.
 */
class GpuLayoutTest {
    private static RankInfo[] ranksOn(String... hosts) {
        RankInfo[] all = new RankInfo[hosts.length];
        for (int r = 0; r < hosts.length; r++) {
            all[r] = new RankInfo(r, hosts.length, hosts[r], 100 + r, 1, Map.of());
        }
        return all;
    }

    private static final CclLog LOG = new CclLog(0, Params.defaults());

    @Test
    void oneHostKeepsTheGpuCommunicator() {
        assertTrue(Engines.oneHost(Arrays.asList(ranksOn("a", "a", "a"))));
        assertFalse(Engines.oneHost(Arrays.asList(ranksOn("a", "a", "b"))));
    }

    @Test
    void evenHostsRunTwoLevelOverTheHosts() {
        assertArrayEquals(new int[][] {{0, 1}, {2, 3}}, Engines.gpuLayout(ranksOn("a", "a", "b", "b"), LOG).byHost());
        assertArrayEquals(new int[][] {{0}, {1}}, Engines.gpuLayout(ranksOn("a", "b"), LOG).byHost(),
                "one GPU rank per host: the GPU level is a copy, the ring crosses hosts");
    }

    @Test
    void unevenHostsRunOneRingOverEveryRank() {
        assertArrayEquals(new int[][] {{0}, {1}, {2}}, Engines.gpuLayout(ranksOn("a", "a", "b"), LOG).byHost());
    }
}
