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
        assertEquals(6, results.size());
        SparkMlBench.Result ours = results.get(3);
        assertEquals("generated", ours.set());
        assertTrue(ours.method().startsWith("sparkccl"), ours.method());
        assertEquals(160261, ours.trainRows());
        assertTrue(ours.config().contains("Adam"), ours.config());

        String table = SparkMlBench.table(results);
        long comparisons = table.lines().filter(l -> l.contains("sparkccl's fit")).count();
        assertEquals(4, comparisons, table); // 1 sparkccl x 2 MLlib fits, on 2 data sets
        assertTrue(table.contains("generated: sparkccl's fit 8.1x faster than MLlib MultilayerPerceptronClassifier (maxIter 100)'s"),
                table);

        byte[] png = Charts.png(SparkMlBench.chart(results));
        assertTrue(png.length > 1000 && png[1] == 'P' && png[2] == 'N' && png[3] == 'G', "a PNG");
    }
}
