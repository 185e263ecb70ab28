package org.sparkccl.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.Test;
import org.sparkccl.arrow.GradientBuffer;
import org.sparkccl.arrow.TensorLayout;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.ReduceOp;

/**
 * The README's example ("Use it from your own Spark job"), run: the lines between the README
 * markers below must appear in README.md exactly (indented by 4 spaces there), so the example users
 * copy is one that compiles and gives the sum it promises.
 */
class ReadmeExampleTest {
    private static final Path SOURCE = Path.of("src/test/java/org/sparkccl/spark/ReadmeExampleTest.java");
    private static final Path README = Path.of("../README.md");

    static List<Float> example(JavaSparkContext jsc) {
        // README begin
        JavaRDD<Integer> ranks = jsc.parallelize(List.of(0, 1, 2, 3), 4);   // one partition per rank
        List<Float> firsts = SparkCclJobs.barrierMapPartitions(ranks, partition -> {
            Communicator comm = SparkCcl.communicator();                   // once per task (one bootstrap round)
            TensorLayout layout = TensorLayout.builder().add("w", 1000, 10).add("b", 10).build();
            try (BufferAllocator allocator = new RootAllocator();
                 GradientBuffer grads = GradientBuffer.allocate(allocator, layout)) {
                grads.fill(comm.rank() + 1);               // this rank's gradients (here: rank + 1)
                grads.allReduce(comm, ReduceOp.SUM);       // in place; every rank now holds the sum
                return List.of(grads.getFloat(0)).iterator();
            }
        }).collect();                                      // [10.0, 10.0, 10.0, 10.0]
        // README end
        return firsts;
    }

    @Test
    void theReadmeExampleRunsAndSums() {
        SparkSession spark = SparkSession.builder().config(SparkTestSupport.localConf(4, "sparkccl-readme")).getOrCreate();
        try {
            List<Float> firsts = example(JavaSparkContext.fromSparkContext(spark.sparkContext()));
            assertEquals(List.of(10f, 10f, 10f, 10f), firsts);
        } finally {
            spark.stop();
        }
    }

    @Test
    void theReadmeShowsExactlyThisExample() throws IOException {
        // The method body's indent (8) becomes Markdown's code indent (4).
        List<String> block = SparkTestSupport.markedBlock(SOURCE, "README", 4);
        String expected = String.join("\n", block);
        assertTrue(Files.readString(README).contains(expected),
                "README.md must show the example of " + SOURCE + " exactly (4-space indent), i.e.:\n" + expected);
    }
}
