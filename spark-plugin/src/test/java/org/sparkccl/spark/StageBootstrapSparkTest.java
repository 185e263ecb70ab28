package org.sparkccl.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Collections;
import java.util.List;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import java.util.stream.Stream;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.Test;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.bootstrap.SharedDirectoryBootstrap;

/** Barrier stages of 4 tasks in local mode, through each bootstrap. */
class StageBootstrapSparkTest {
    private static final int RANKS = 4;
    private static String lastAppId;

    @Test
    void aStageOfOneHostMeetsInTheHostDirectory() throws IOException {
        List<String> seen = buildAll(SparkTestSupport.localConf(RANKS, "sparkccl-bootstrap-auto"));
        for (String s : seen) {
            String[] kindAndMillis = s.split(" ");
            assertEquals("HOST", kindAndMillis[0], seen.toString());
            // Not a performance goal: the Spark bootstrap alone takes about a second, this a few milliseconds.
            assertTrue(Long.parseLong(kindAndMillis[1]) < 900, "building took " + seen + " ms");
        }
        try (Stream<Path> left = Files.list(SharedDirectoryBootstrap.defaultRoot())) {
            List<Path> dirs = left.filter(p -> p.getFileName().toString().startsWith(
                    SharedDirectoryBootstrap.DIRECTORY_PREFIX + lastAppId)).collect(Collectors.toList());
            assertEquals(List.of(), dirs, "rendezvous directories left behind");
        }
    }

    @Test
    void aJobPropertyChoosesTheBootstrapOfThatJobOnly() {
        SparkSession spark = SparkSession.builder().config(SparkTestSupport.localConf(RANKS, "sparkccl-bootstrap-job"))
                .getOrCreate();
        try {
            spark.sparkContext().setLocalProperty("spark.sparkccl.bootstrap", "spark");
            assertEquals(Collections.nCopies(RANKS, "SPARK"), kinds(buildAll(spark)));
            spark.sparkContext().setLocalProperty("spark.sparkccl.bootstrap", null);
            assertEquals(Collections.nCopies(RANKS, "HOST"), kinds(buildAll(spark)));
        } finally {
            spark.stop();
        }
    }

    @Test
    void sparkMakesEveryStageGoThroughAllGather() {
        List<String> seen = buildAll(SparkTestSupport.localConf(RANKS, "sparkccl-bootstrap-spark")
                .set("spark.sparkccl.bootstrap", "spark"));
        for (String s : seen) {
            assertEquals("SPARK", s.split(" ")[0], seen.toString());
        }
    }

    /** Every rank's bootstrap kind and build time ("HOST 12"), after one all-reduce to show it works. */
    private static List<String> buildAll(SparkConf conf) {
        SparkSession spark = SparkSession.builder().config(conf).getOrCreate();
        try {
            lastAppId = spark.sparkContext().applicationId();
            return buildAll(spark);
        } finally {
            spark.stop();
        }
    }

    private static List<String> buildAll(SparkSession spark) {
        JavaSparkContext jsc = JavaSparkContext.fromSparkContext(spark.sparkContext());
        return SparkCclJobs.barrierMapPartitions(
                jsc.parallelize(IntStream.range(0, RANKS).boxed().collect(Collectors.toList()), RANKS), rows -> {
                    Communicator comm = SparkCcl.communicator();
                    comm.barrier();
                    return Collections.singletonList(SparkCcl.bootstrapKind() + " " + SparkCcl.buildMillis()).iterator();
                }).collect();
    }

    private static List<String> kinds(List<String> seen) {
        return seen.stream().map(s -> s.split(" ")[0]).collect(Collectors.toList());
    }
}
