package org.sparkccl.train;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.Dependency;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.storage.StorageLevel;
import scala.Tuple2;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Training rows split across ranks by global id (row i of the DataFrame, in its order, goes to rank
 * i mod ranks), as {@link RowBlock}s, with the driver's statistics. Two Spark jobs, both over a few
 * large arrays per partition: one reads the rows into a block per partition (cached) and takes each
 * one's row count and statistics; the other, the shuffle that gives each rank its part of every
 * block, runs as the parent stage of the training stage. The shuffle's output stays until {@link
 * #release}, so training may run more than once (and a retried training stage) without it.
 */
public final class PreparedData {
    private final JavaRDD<RowBlock> blocks;
    private final JavaRDD<RowBlock> byRank;
    private final DataStats stats;
    private final int ranks;

    private PreparedData(JavaRDD<RowBlock> blocks, JavaRDD<RowBlock> byRank, DataStats stats, int ranks) {
        this.blocks = blocks;
        this.byRank = byRank;
        this.stats = stats;
        this.ranks = ranks;
    }

    public static PreparedData of(Dataset<Row> frame, String featuresColumn, String labelColumn, int ranks) {
        JavaRDD<RowBlock> blocks = RowBlockReader.blocks(frame, featuresColumn, labelColumn)
                .persist(StorageLevel.MEMORY_AND_DISK());
        List<Tuple2<Integer, DataStats>> parts = blocks.map(b -> new Tuple2<>(b.partition, b.stats())).collect();
        long[] offsets = new long[blocks.getNumPartitions()];
        DataStats stats = new DataStats();
        long rows = 0;
        for (Tuple2<Integer, DataStats> part : parts) { // in partition order, as collect returns them
            offsets[part._1()] = rows;
            rows += part._2().rows();
            stats = stats.merge(part._2());
        }
        if (stats.rows() > Integer.MAX_VALUE) {
            throw new IllegalArgumentException(stats.rows() + " examples: TrainJob handles at most 2^31 - 1");
        }
        if (stats.rows() < ranks) {
            blocks.unpersist(false);
            throw new IllegalArgumentException(stats.rows() + " examples cannot be split across " + ranks + " ranks");
        }
        JavaRDD<RowBlock> byRank;
        if (barrierReady(blocks.rdd(), ranks)) {
            // A partition per rank already: rank r trains on partition r's rows as they are, no shuffle.
            byRank = blocks.map(b -> b.numbered(offsets[b.partition]));
        } else {
            byRank = blocks.flatMapToPair(b -> {
                List<Tuple2<Long, RowBlock>> out = new ArrayList<>(ranks);
                for (int r = 0; r < ranks; r++) {
                    out.add(new Tuple2<>((long) r, b.forRank(r, ranks, offsets[b.partition])));
                }
                return out.iterator();
            }).partitionBy(new TrainingData.IdModulo(ranks)).values();
        }
        return new PreparedData(blocks, byRank, stats, ranks);
    }

    /**
     * Whether a barrier stage of {@code ranks} tasks may run straight on {@code rdd}: it has that many
     * partitions, and so does every RDD it reads without a shuffle, each reading at most one shuffle
     * (Spark refuses a barrier stage otherwise, e.g. after a coalesce or a union).
     */
    static boolean barrierReady(RDD<?> rdd, int ranks) {
        if (rdd.getNumPartitions() != ranks) {
            return false;
        }
        int shuffles = 0;
        for (Dependency<?> d : CollectionConverters.asJava(rdd.dependencies())) {
            if (d instanceof ShuffleDependency) {
                shuffles++;
            } else if (!barrierReady(d.rdd(), ranks)) {
                return false;
            }
        }
        return shuffles <= 1;
    }

    /** Partition r: rank r's rows (put together by {@link #shard}). */
    public JavaRDD<RowBlock> byRank() {
        return byRank;
    }

    /**
     * Rank {@code rank}'s partition of {@link #byRank} as the shard it trains on, features scaled:
     * one block of consecutive ids, or its part (every {@code ranks}-th id) of every block.
     */
    public static Shard shard(Iterator<RowBlock> parts, DataStats stats, int rank, int ranks) {
        List<RowBlock> mine = new ArrayList<>();
        parts.forEachRemaining(mine::add);
        FeatureBatch batch = RowBlock.batch(mine, stats);
        if (mine.size() == 1 && mine.get(0).idStride == 1) {
            return Shard.range(batch, mine.get(0).firstId);
        }
        return new Shard(batch, rank, ranks, (int) stats.rows());
    }

    public DataStats stats() {
        return stats;
    }

    public int ranks() {
        return ranks;
    }

    /** Every example on the driver, in id order: for the single-process reference on small data. */
    public List<Example> collectAll() {
        List<Example> all = new ArrayList<>();
        for (RowBlock b : byRank.collect()) {
            all.addAll(b.examples());
        }
        all.sort(Comparator.comparingLong(Example::id));
        return all;
    }

    public void release() {
        blocks.unpersist(false);
    }

    /** Hadoop settings for checkpoints: spark.hadoop.* entries, without the prefix. */
    public static Map<String, String> hadoopSettings(org.apache.spark.SparkConf conf, org.apache.hadoop.conf.Configuration hadoop) {
        Map<String, String> out = new LinkedHashMap<>();
        String defaultFs = hadoop.get("fs.defaultFS");
        if (defaultFs != null) {
            out.put("fs.defaultFS", defaultFs);
        }
        for (Tuple2<String, String> e : conf.getAllWithPrefix("spark.hadoop.")) {
            out.put(e._1(), e._2());
        }
        return out;
    }
}
