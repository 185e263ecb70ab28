package org.sparkccl.spark.ml;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.apache.spark.ml.PipelineModel;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.sparkccl.spark.SparkTestSupport;

/**
 * Run in a JVM of its own by {@link SparkCclMlpClassifierTest}: loads a saved model (a
 * {@link SparkCclMlpClassificationModel}, or a {@link PipelineModel} with one), scores the rows of
 * a Parquet file and writes one line per row (see {@link #lines}) to the output file.
 *
 * <pre>SavedModelScorer (model|pipeline MODEL_DIR DATA_PARQUET OUT_FILE)...</pre>
 */
public final class SavedModelScorer {
    private SavedModelScorer() {
    }

    public static void main(String[] args) throws Exception {
        SparkSession spark = SparkSession.builder().config(SparkTestSupport.localConf(2, "sparkccl-saved-model")).getOrCreate();
        try {
            for (int a = 0; a + 3 < args.length; a += 4) {
                Dataset<Row> data = spark.read().parquet(args[a + 2]);
                Dataset<Row> scored = args[a].equals("pipeline") ? PipelineModel.load(args[a + 1]).transform(data)
                        : SparkCclMlpClassificationModel.load(args[a + 1]).transform(data);
                Files.write(Path.of(args[a + 3]), lines(scored));
                System.out.println("scored " + data.count() + " rows with the saved " + args[a]);
            }
        } finally {
            spark.stop();
        }
    }

    /** "id prediction p0 p1 ...", by id, every double exactly (Double.toString). */
    static List<String> lines(Dataset<Row> scored) {
        return scored.select("id", "prediction", "probability").orderBy("id").collectAsList().stream()
                .map(r -> r.getLong(0) + " " + r.getDouble(1) + " "
                        + java.util.Arrays.toString(((org.apache.spark.ml.linalg.Vector) r.get(2)).toArray()))
                .toList();
    }
}
