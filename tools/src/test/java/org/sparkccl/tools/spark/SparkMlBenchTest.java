package org.sparkccl.tools.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.sparkccl.train.plot.Charts;

/** SparkMlBench's report side, on the recorded run (docs/perf/spark-ml.csv): reading, table, chart. No Spark. */
class SparkMlBenchTest {
    private static final Path RECORDED = Path.of("../docs/perf/spark-ml.csv");

    @Test
    void theRecordedRunReadsBackAndReportsEachSparkcclFitAgainstEachMllibFit() throws Exception {
        List<SparkMlBench.Result> results = SparkMlBench.readCsv(RECORDED);
        assertEquals(14, results.size());
        SparkMlBench.Result ours = results.get(7);
        assertEquals("generated", ours.set());
        assertEquals("sparkccl SparkCclMlpClassifier (bootstrap auto)", ours.method());
        assertEquals(160261, ours.trainRows());
        assertTrue(ours.config().contains("Adam") && ours.config().contains("median of 5 fits"), ours.config());

        String table = SparkMlBench.table(results);
        long comparisons = table.lines().filter(l -> l.contains("sparkccl's fit")).count();
        assertEquals(20, comparisons, table); // 2 sparkccl bootstraps x 5 MLlib fits, on 2 data sets
        assertTrue(table.contains("generated: sparkccl's fit 48.5x faster than MLlib MultilayerPerceptronClassifier (maxIter 100)'s"),
                table);
        // The same-accuracy reference: MLlib's fewest iterations within half a point of its best.
        assertEquals("MLlib MultilayerPerceptronClassifier (maxIter 30)",
                SparkMlBench.mllibAtItsBestAccuracy(results, "generated").method());
        assertTrue(table.contains("generated, at the same accuracy: MLlib's fewest iterations within 0.5 points of its best"
                + " are maxIter 30 (0.8946, 9.68 s); sparkccl 0.8938 (-0.08 points) in 0.59 s: 16.4x faster"), table);

        byte[] png = Charts.png(SparkMlBench.chart(results));
        assertTrue(png.length > 1000 && png[1] == 'P' && png[2] == 'N' && png[3] == 'G', "a PNG");
    }

    @Test
    void warmupFitsAreNamedInTheConfigOfTheResultTheyPreceded() {
        SparkMlBench.Result timed = new SparkMlBench.Result("digits", "MLlib MultilayerPerceptronClassifier (maxIter 10)",
                1418, 379, 2.5, 0.8, "L-BFGS");
        SparkMlBench.Result first = new SparkMlBench.Result("digits", "MLlib MultilayerPerceptronClassifier (maxIter 10)",
                1418, 379, 5.25, 0.8, "L-BFGS");
        SparkMlBench.Result second = new SparkMlBench.Result("digits", "MLlib MultilayerPerceptronClassifier (maxIter 10)",
                1418, 379, 3.0, 0.8, "L-BFGS");
        SparkMlBench.Result r = SparkMlBench.withWarmup(timed, List.of(first, second));
        assertEquals(2.5, r.fitSeconds());
        assertEquals("L-BFGS; after 2 untimed warm-up fits at maxIter 10 (5.25, 3.00 s)", r.config());
        assertEquals(timed, SparkMlBench.withWarmup(timed, List.of()));
    }
}
