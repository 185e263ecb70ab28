package org.sparkccl.train;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.storage.StorageLevel;
import scala.Tuple2;

/** Examples split across ranks by id (cached: training may run more than once), with the driver's statistics. */
public final class PreparedData {
    private final JavaRDD<Example> byRank;
    private final DataStats stats;
    private final int ranks;

    private PreparedData(JavaRDD<Example> byRank, DataStats stats, int ranks) {
        this.byRank = byRank;
        this.stats = stats;
        this.ranks = ranks;
    }

    public static PreparedData of(Dataset<Row> frame, String featuresColumn, String labelColumn, int ranks) {
        JavaRDD<Example> examples = TrainingData.examples(frame, featuresColumn, labelColumn)
                .persist(StorageLevel.MEMORY_AND_DISK());
        DataStats stats = TrainingData.stats(examples);
        if (stats.rows() > Integer.MAX_VALUE) {
            throw new IllegalArgumentException(stats.rows() + " examples: TrainJob handles at most 2^31 - 1");
        }
        if (stats.rows() < ranks) {
            throw new IllegalArgumentException(stats.rows() + " examples cannot be split across " + ranks + " ranks");
        }
        JavaRDD<Example> byRank = TrainingData.byRank(examples, ranks).persist(StorageLevel.MEMORY_AND_DISK());
        byRank.count(); // materialise before the barrier stage, so that only training runs in it
        examples.unpersist(false);
        return new PreparedData(byRank, stats, ranks);
    }

    public JavaRDD<Example> byRank() {
        return byRank;
    }

    public DataStats stats() {
        return stats;
    }

    public int ranks() {
        return ranks;
    }

    /** Every example on the driver, in id order: for the single-process reference on small data. */
    public List<Example> collectAll() {
        return byRank.mapToPair(e -> new Tuple2<>(e.id, e)).sortByKey().values().collect();
    }

    public void release() {
        byRank.unpersist(false);
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
