package org.sparkccl.train;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** How rows travel to the ranks: a partition's block cut by id modulo ranks, or kept whole as one rank's run. No Spark. */
class RowBlockTest {
    /** Partition p of {@code sizes.length}, rows numbered from 0 across them, feature 0 = the row's global id. */
    private static List<RowBlock> partitions(int... sizes) {
        List<RowBlock> out = new ArrayList<>();
        int id = 0;
        for (int p = 0; p < sizes.length; p++) {
            float[] x = new float[sizes[p] * 2];
            float[] y = new float[sizes[p]];
            for (int r = 0; r < sizes[p]; r++, id++) {
                x[2 * r] = id;
                x[2 * r + 1] = -id;
                y[r] = id % 3;
            }
            out.add(RowBlock.ofPartition(p, sizes[p], 2, x, y));
        }
        return out;
    }

    private static DataStats stats(List<RowBlock> blocks) {
        DataStats s = new DataStats();
        for (RowBlock b : blocks) {
            s = s.merge(b.stats());
        }
        return s;
    }

    @Test
    void everyRankGetsTheIdsCongruentToItAndTrainsOnThemInIdOrder() {
        List<RowBlock> blocks = partitions(5, 0, 7, 3);
        DataStats stats = stats(blocks);
        assertEquals(15, stats.rows());
        assertEquals(3, stats.classes());
        int ranks = 4;
        long[] offsets = {0, 5, 5, 12};
        int[] seen = new int[15];
        for (int rank = 0; rank < ranks; rank++) {
            List<RowBlock> parts = new ArrayList<>();
            for (int p = blocks.size() - 1; p >= 0; p--) { // any order: the shard sorts them
                parts.add(blocks.get(p).forRank(rank, ranks, offsets[p]));
            }
            Shard shard = PreparedData.shard(parts.iterator(), stats, rank, ranks);
            FeatureBatch data = shard.data();
            for (int r = 0; r < data.rows(); r++) {
                int id = Math.round(data.feature(r, 0) * 14); // scaled by the largest id, 14
                assertEquals(rank + r * ranks, id, "rank " + rank + " row " + r);
                assertEquals(id % 3, data.label(r));
                seen[id]++;
            }
            int[] ids = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
            int[] local = new int[ids.length];
            int n = shard.localRows(ids, ids.length, local);
            assertEquals(data.rows(), n);
            for (int k = 0; k < n; k++) {
                assertEquals(k, local[k]);
            }
        }
        for (int count : seen) {
            assertEquals(1, count);
        }
    }

    @Test
    void aWholePartitionIsARunOfConsecutiveIds() {
        List<RowBlock> blocks = partitions(4, 6);
        DataStats stats = stats(blocks);
        Shard shard = PreparedData.shard(List.of(blocks.get(1).numbered(4)).iterator(), stats, 1, 2);
        assertEquals(6, shard.data().rows());
        int[] ids = {9, 3, 4, 12, 6};
        int[] local = new int[ids.length];
        assertEquals(3, shard.localRows(ids, ids.length, local));
        assertArrayEquals(new int[] {5, 0, 2}, java.util.Arrays.copyOf(local, 3));
        assertEquals(List.of(4L, 5L, 6L, 7L, 8L, 9L), blocks.get(1).numbered(4).examples().stream().map(Example::id).toList());
    }

    @Test
    void badLabelsAndRaggedRowsAreNamedByPartitionAndRow() {
        RowBlock bad = RowBlock.ofPartition(3, 2, 1, new float[] {1, 2}, new float[] {0, 1.5f});
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, bad::stats);
        assertTrue(e.getMessage().contains("partition 3 at index 1") && e.getMessage().contains("1.5"), e.getMessage());
        DataStats two = RowBlock.ofPartition(0, 1, 2, new float[] {1, 2}, new float[] {0}).stats();
        DataStats one = RowBlock.ofPartition(1, 1, 1, new float[] {1}, new float[] {0}).stats();
        e = assertThrows(IllegalArgumentException.class, () -> two.merge(one));
        assertTrue(e.getMessage().contains("features"), e.getMessage());
    }
}
