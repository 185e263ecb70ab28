package org.sparkccl.train;


/**
 * The examples one rank holds: those whose global id is congruent to the rank modulo the rank
 * count, in id order, so that example {@code id} is local row {@code id / ranks}. With one rank the
 * shard is the whole data set (the single-process reference).
 */
public final class Shard {
    private final FeatureBatch data;
    private final int rank;
    private final int ranks;

    public Shard(FeatureBatch data, int rank, int ranks, int totalRows) {
        int expected = totalRows / ranks + (rank < totalRows % ranks ? 1 : 0);
        if (data.rows() != expected) {
            throw new IllegalArgumentException("rank " + rank + " of " + ranks + " holds " + data.rows()
                    + " rows, expected " + expected + " of " + totalRows + ": the data was not partitioned by id modulo ranks");
        }
        this.data = data;
        this.rank = rank;
        this.ranks = ranks;
    }

    public FeatureBatch data() {
        return data;
    }

    /** Of the global ids {@code ids[0 .. count)}, writes the local rows of those this rank holds; returns how many. */
    public int localRows(int[] ids, int count, int[] out) {
        int k = 0;
        for (int i = 0; i < count; i++) {
            if (ids[i] % ranks == rank) {
                out[k++] = ids[i] / ranks;
            }
        }
        return k;
    }
}
