package org.sparkccl.train;


/**
 * The examples one rank holds, in id order: those with global ids {@code first}, {@code first +
 * stride}, ... Either every {@code ranks}-th example (ids congruent to the rank modulo the rank
 * count: example {@code id} is local row {@code id / ranks}), or one contiguous run of ids (stride
 * 1: a Spark partition of its own per rank, no shuffle). With one rank the shard is the whole data
 * set (the single-process reference).
 */
public final class Shard {
    private final FeatureBatch data;
    private final long first;
    private final int stride;

    /** The examples whose id is congruent to {@code rank} modulo {@code ranks}, checked against the total. */
    public Shard(FeatureBatch data, int rank, int ranks, int totalRows) {
        this(data, rank, ranks);
        int expected = totalRows / ranks + (rank < totalRows % ranks ? 1 : 0);
        if (data.rows() != expected) {
            throw new IllegalArgumentException("rank " + rank + " of " + ranks + " holds " + data.rows()
                    + " rows, expected " + expected + " of " + totalRows + ": the data was not partitioned by id modulo ranks");
        }
    }

    private Shard(FeatureBatch data, long first, int stride) {
        this.data = data;
        this.first = first;
        this.stride = stride;
    }

    /** The examples with ids {@code first .. first + data.rows() - 1}. */
    public static Shard range(FeatureBatch data, long first) {
        return new Shard(data, first, 1);
    }

    public FeatureBatch data() {
        return data;
    }

    /** Of the global ids {@code ids[0 .. count)}, writes the local rows of those this rank holds; returns how many. */
    public int localRows(int[] ids, int count, int[] out) {
        int k = 0;
        int rows = data.rows();
        for (int i = 0; i < count; i++) {
            long d = ids[i] - first;
            if (d >= 0 && d % stride == 0 && d / stride < rows) {
                out[k++] = (int) (d / stride);
            }
        }
        return k;
    }
}
