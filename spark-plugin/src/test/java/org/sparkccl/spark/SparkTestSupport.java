package org.sparkccl.spark;

import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.StringJoiner;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.ReduceOp;

/** Spark configurations for tests: everything on 127.0.0.1, no UI, sparkccl's plugin installed. */
public final class SparkTestSupport {
    private SparkTestSupport() {
    }

    public static SparkConf localConf(int threads, String appName) {
        return base(appName).setMaster("local[" + threads + "]");
    }

    /**
     * {@code executors} executor JVMs of {@code cores} cores, each given {@code gpus} fake GPUs (addresses
     * 0..gpus-1) by a discovery script. The workers launch executors from SPARK_HOME (set by the
     * build to an empty directory under target/) with this test's class path.
     */
    static SparkConf localClusterConf(int executors, int cores, int gpus, String appName) {
        Path home = Paths.get(System.getenv("SPARK_HOME"));
        try {
            Files.createDirectories(home.resolve("jars"));
            Path script = home.resolve("fake-gpus.sh");
            StringJoiner addresses = new StringJoiner("\",\"", "[\"", "\"]");
            for (int g = 0; g < gpus; g++) {
                addresses.add(Integer.toString(g));
            }
            Files.writeString(script, "#!/bin/sh\necho '{\"name\":\"gpu\",\"addresses\":" + addresses + "}'\n");
            Files.setPosixFilePermissions(script, PosixFilePermissions.fromString("rwx------"));
            return clusterConf("local-cluster[" + executors + "," + cores + ",1024]", appName)
                    // Short-lived executors on a small machine: C1 only and the serial collector start faster.
                    .set("spark.executor.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
                    .set("spark.worker.resource.gpu.amount", Integer.toString(gpus))
                    .set("spark.worker.resource.gpu.discoveryScript", script.toString())
                    .set("spark.executor.resource.gpu.amount", Integer.toString(gpus))
                    .set("spark.executor.resource.gpu.discoveryScript", script.toString())
                    .set("spark.task.resource.gpu.amount", "1");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /**
     * A {@code local-cluster[...]} master: executors are JVMs that Spark's workers launch from
     * SPARK_HOME (its jars/ may be empty) with this test's class path, as Spark launches them.
     */
    static SparkConf clusterConf(String master, String appName) {
        try {
            Files.createDirectories(Paths.get(System.getenv("SPARK_HOME")).resolve("jars"));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return base(appName)
                .setMaster(master)
                .set("spark.executor.extraClassPath", absoluteTestClassPath())
                // Executor JVMs take a while to start on a small machine; Spark checks barrier slots every interval.
                .set("spark.scheduler.barrier.maxConcurrentTasksCheck.interval", "1s")
                .set("spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures", "300");
    }

    private static SparkConf base(String appName) {
        return new SparkConf()
                .setAppName(appName)
                .set("spark.driver.host", "127.0.0.1")
                .set("spark.driver.bindAddress", "127.0.0.1")
                .set("spark.ui.enabled", "false")
                .set("spark.sql.shuffle.partitions", "4")
                .set("spark.plugins", SparkCclPlugin.class.getName());
    }

    /** Blocks until {@code executors} executors have registered, so that the first barrier stage need not retry. */
    static void awaitExecutors(SparkContext sc, int executors) throws InterruptedException {
        long deadline = System.nanoTime() + 180_000_000_000L;
        // getExecutorInfos lists the driver too.
        while (sc.statusTracker().getExecutorInfos().length < executors + 1) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("executors did not register within 180 s; see target/spark-home/work");
            }
            Thread.sleep(200);
        }
    }

    /** Spark needs absolute paths in spark.executor.extraClassPath; surefire may run from a manifest jar. */
    public static String absoluteTestClassPath() {
        String cp = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        StringJoiner out = new StringJoiner(File.pathSeparator);
        for (String entry : cp.split(File.pathSeparator)) {
            if (!entry.isEmpty()) {
                out.add(new File(entry).getAbsolutePath());
            }
        }
        return out.toString();
    }

    /**
     * The lines of {@code source} between the lines {@code // MARKER begin} and {@code // MARKER end},
     * with their first {@code indent} characters (the method body's indent) cut: a documented
     * example, to compare with the page that shows it.
     */
    public static List<String> markedBlock(Path source, String marker, int indent) throws IOException {
        List<String> block = new ArrayList<>();
        boolean inside = false;
        for (String line : Files.readAllLines(source)) {
            if (line.strip().equals("// " + marker + " end")) {
                break;
            }
            if (inside) {
                block.add(line.isBlank() ? "" : line.substring(indent));
            }
            inside |= line.strip().equals("// " + marker + " begin");
        }
        if (block.size() < 5) {
            throw new AssertionError("no '// " + marker + " begin/end' markers around an example in " + source);
        }
        return block;
    }

    /** Values in [-1, 1) from a seed: what rank {@code rank} contributes in the correctness tests. */
    static float[] randomFloats(long seed, int rank, int count) {
        Random random = new Random(seed * 1_000_003L + rank);
        float[] out = new float[count];
        for (int i = 0; i < count; i++) {
            out[i] = random.nextFloat() * 2 - 1;
        }
        return out;
    }

    /**
     * All-reduces (SUM) this rank's {@link #randomFloats} on {@code comm} and returns the largest
     * difference from the float64 reference; throws where the sums are near zero, which random
     * inputs never give.
     */
    static double allReduceMaxError(Communicator comm, long seed, int count) {
        float[] data = randomFloats(seed, comm.rank(), count);
        comm.allReduce(data, ReduceOp.SUM);
        double[] reference = referenceSum(seed, comm.size(), count);
        double maxError = 0;
        double magnitudes = 0;
        for (int i = 0; i < count; i++) {
            maxError = Math.max(maxError, Math.abs(data[i] - reference[i]));
            magnitudes += Math.abs(data[i]);
        }
        if (magnitudes < 0.1 * count) {
            throw new IllegalStateException("rank " + comm.rank() + ": the sums are near zero");
        }
        return maxError;
    }

    /** The float64 sum over {@code ranks} ranks of {@link #randomFloats}: the reference for a SUM all-reduce. */
    static double[] referenceSum(long seed, int ranks, int count) {
        double[] sum = new double[count];
        for (int r = 0; r < ranks; r++) {
            float[] theirs = randomFloats(seed, r, count);
            for (int i = 0; i < count; i++) {
                sum[i] += theirs[i];
            }
        }
        return sum;
    }
}
