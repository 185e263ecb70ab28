package org.sparkccl.train;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/**
 * Training rows as one dense block: a {@code rows x cols} row-major float matrix and a label per
 * row, whose global ids are {@code firstId}, {@code firstId + idStride}, ... This is how training
 * data travels from a Dataset to the ranks: one object per Spark partition (and then one per
 * partition and rank), not one per row, so that caching it and shuffling it to the ranks moves a few
 * large arrays instead of serializing a small object per row.
 */
public final class RowBlock implements Serializable {
    private static final long serialVersionUID = 1L;

    final int partition;
    final long firstId;
    final int idStride;
    final int rows;
    final int cols;
    final float[] features;
    final float[] labels;

    RowBlock(int partition, long firstId, int idStride, int rows, int cols, float[] features, float[] labels) {
        this.partition = partition;
        this.firstId = firstId;
        this.idStride = idStride;
        this.rows = rows;
        this.cols = cols;
        this.features = features;
        this.labels = labels;
    }

    /** The block of Spark partition {@code partition} as read, before its ids are known. */
    static RowBlock ofPartition(int partition, int rows, int cols, float[] features, float[] labels) {
        return new RowBlock(partition, -1, 1, rows, cols, features, labels);
    }

    /** This partition's statistics (the label and width checks name the row by its place in the partition). */
    DataStats stats() {
        DataStats s = new DataStats();
        String what = "row of partition " + partition + " at index ";
        for (int r = 0; r < rows; r++) {
            s.add(features, r * cols, cols, labels[r], what, r);
        }
        return s;
    }

    /**
     * Of this partition's rows, numbered from {@code offset} (the rows of the partitions before it),
     * those whose global id is congruent to {@code rank} modulo {@code ranks}: rank {@code rank}'s part.
     */
    RowBlock forRank(int rank, int ranks, long offset) {
        int start = (int) Math.floorMod(rank - offset, (long) ranks);
        int n = start >= rows ? 0 : (rows - start + ranks - 1) / ranks;
        float[] x = new float[n * cols];
        float[] y = new float[n];
        for (int j = 0; j < n; j++) {
            int r = start + j * ranks;
            System.arraycopy(features, r * cols, x, j * cols, cols);
            y[j] = labels[r];
        }
        return new RowBlock(partition, offset + start, ranks, n, cols, x, y);
    }

    /** This partition's rows, numbered from {@code offset} (the rows of the partitions before it). */
    RowBlock numbered(long offset) {
        return new RowBlock(partition, offset, 1, rows, cols, features, labels);
    }

    /** One rank's parts, put in id order and scaled as {@code stats} says, as the batch it trains on. */
    static FeatureBatch batch(List<RowBlock> parts, DataStats stats) {
        List<RowBlock> mine = new ArrayList<>(parts);
        mine.sort(Comparator.comparingLong(b -> b.firstId));
        int cols = stats.cols();
        int total = 0;
        for (RowBlock b : mine) {
            total += b.rows;
        }
        float[] x = new float[total * cols];
        float[] y = new float[total];
        int at = 0;
        for (RowBlock b : mine) {
            for (int r = 0; r < b.rows; r++, at++) {
                for (int i = 0; i < cols; i++) {
                    x[at * cols + i] = stats.scale(i, b.features[r * cols + i]);
                }
                y[at] = b.labels[r];
            }
        }
        return FeatureBatch.of(total, cols, x, y);
    }

    /** Its rows as examples with their global ids (for the single-process reference on small data). */
    List<Example> examples() {
        List<Example> out = new ArrayList<>(rows);
        for (int r = 0; r < rows; r++) {
            float[] x = new float[cols];
            System.arraycopy(features, r * cols, x, 0, cols);
            out.add(new Example(firstId + (long) r * idStride, x, labels[r]));
        }
        return out;
    }
}
