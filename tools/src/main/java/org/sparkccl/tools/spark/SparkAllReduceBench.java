package org.sparkccl.tools.spark;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.util.Base64;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import java.util.concurrent.Callable;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.apache.spark.BarrierTaskContext;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.storage.StorageLevel;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.DataType;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.param.Params;
import org.sparkccl.spark.SparkCcl;
import org.sparkccl.spark.SparkCclJobs;
import org.sparkccl.spark.SparkCclPlugin;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * One step's all-reduce of a gradient across the tasks of a Spark job, three ways, in one run on
 * the same data: sparkccl inside a barrier stage; Spark's treeAggregate to the driver; and
 * BarrierTaskContext.allGather of the vectors, summed by every task. Prints a Markdown table.
 * A benchmark, not a test: it asserts nothing about time, but it does check every sum against a
 * float64 reference and fails on a wrong one.
 */
@Command(name = "spark-allreduce-bench", mixinStandardHelpOptions = true, sortOptions = false,
        description = "Per-step all-reduce of a float32 gradient: sparkccl vs treeAggregate vs BarrierTaskContext.allGather.")
public final class SparkAllReduceBench implements Callable<Integer> {
    @Option(names = "--ranks", defaultValue = "4", description = "tasks (partitions) [${DEFAULT-VALUE}]")
    int ranks;
    @Option(names = "--bytes", defaultValue = "16M", description = "gradient size per task, K/M/G suffixes [${DEFAULT-VALUE}]")
    String bytes;
    @Option(names = "--iters", defaultValue = "20", description = "timed sparkccl steps and treeAggregate jobs [${DEFAULT-VALUE}]")
    int iters;
    @Option(names = "--allgather-iters", defaultValue = "5", description = "timed allGather steps (each takes about a second) [${DEFAULT-VALUE}]")
    int allGatherIters;
    @Option(names = "--warmup", defaultValue = "3", description = "untimed steps first, each way [${DEFAULT-VALUE}]")
    int warmup;
    @Option(names = "--master", description = "Spark master; default: spark-submit's, else local[RANKS]")
    String master;

    public static void main(String[] args) {
        System.exit(new CommandLine(new SparkAllReduceBench()).execute(args));
    }

    @Override
    public Integer call() {
        int count = (int) (Params.parseSize(bytes) / 4);
        SparkSession.Builder builder = SparkSession.builder().appName("sparkccl all-reduce benchmark")
                .config("spark.plugins", SparkCclPlugin.class.getName())
                .config("spark.driver.maxResultSize", "0");
        if (master != null || System.getProperty("spark.master") == null) {
            builder.master(master != null ? master : "local[" + ranks + "]").config("spark.ui.enabled", "false");
            org.apache.logging.log4j.core.config.Configurator.setRootLevel(org.apache.logging.log4j.Level.WARN);
        }
        SparkSession spark = builder.getOrCreate();
        try {
            JavaSparkContext jsc = JavaSparkContext.fromSparkContext(spark.sparkContext());
            System.out.printf(Locale.ROOT, "%d tasks, %s float32 per task (%d elements), master %s, %d cores here%n",
                    ranks, bytes, count, spark.sparkContext().master(), Runtime.getRuntime().availableProcessors());
            List<Integer> ids = IntStream.range(0, ranks).boxed().collect(Collectors.toList());
            JavaRDD<float[]> vectors = jsc.parallelize(ids, ranks).map(r -> vector(r, count))
                    .persist(StorageLevel.MEMORY_ONLY());
            vectors.count();
            double[] reference = reference(ranks, count);

            Timing ccl = sparkccl(jsc, ids, count);
            Timing tree = treeAggregate(vectors, count, reference);
            Timing gather = allGather(jsc, ids, count);

            System.out.println();
            System.out.println("| method | per step (ms), mean | min | max | steps timed | sparkccl is faster by |");
            System.out.println("| --- | ---: | ---: | ---: | ---: | ---: |");
            row("sparkccl all-reduce in a barrier stage", ccl, ccl);
            row("RDD.treeAggregate to the driver", tree, ccl);
            row("BarrierTaskContext.allGather of the vectors, summed in every task", gather, ccl);
            System.out.printf(Locale.ROOT, "%nsparkccl communicator set-up (once per stage, one allGather round): %.0f ms%n",
                    ccl.setupMs);
            return 0;
        } finally {
            spark.stop();
        }
    }

    private static void row(String name, Timing t, Timing ccl) {
        System.out.printf(Locale.ROOT, "| %s | %.2f | %.2f | %.2f | %d | %s |%n", name, t.meanMs(), t.minMs(), t.maxMs(),
                t.stepsMs.length, t == ccl ? "" : String.format(Locale.ROOT, "%.0fx", t.meanMs() / ccl.meanMs()));
    }

    /** Per-step times, and for sparkccl the communicator's set-up. */
    static final class Timing implements java.io.Serializable {
        final double[] stepsMs;
        final double setupMs;

        Timing(double[] stepsMs, double setupMs) {
            this.stepsMs = stepsMs;
            this.setupMs = setupMs;
        }

        double meanMs() {
            double s = 0;
            for (double v : stepsMs) {
                s += v;
            }
            return s / stepsMs.length;
        }

        double minMs() {
            double m = Double.MAX_VALUE;
            for (double v : stepsMs) {
                m = Math.min(m, v);
            }
            return m;
        }

        double maxMs() {
            double m = 0;
            for (double v : stepsMs) {
                m = Math.max(m, v);
            }
            return m;
        }

        /** Step i takes as long as its slowest rank. */
        static Timing slowestRank(List<Timing> perRank) {
            double[] steps = new double[perRank.get(0).stepsMs.length];
            double setup = 0;
            for (Timing t : perRank) {
                for (int i = 0; i < steps.length; i++) {
                    steps[i] = Math.max(steps[i], t.stepsMs[i]);
                }
                setup = Math.max(setup, t.setupMs);
            }
            return new Timing(steps, setup);
        }
    }

    static float[] vector(int rank, int count) {
        Random random = new Random(1000 + rank);
        float[] v = new float[count];
        for (int i = 0; i < count; i++) {
            v[i] = random.nextFloat() * 2 - 1;
        }
        return v;
    }

    static double[] reference(int ranks, int count) {
        double[] sum = new double[count];
        for (int r = 0; r < ranks; r++) {
            float[] v = vector(r, count);
            for (int i = 0; i < count; i++) {
                sum[i] += v[i];
            }
        }
        return sum;
    }

    static void check(String method, float[] got, double[] reference) {
        for (int i = 0; i < reference.length; i++) {
            if (Math.abs(got[i] - reference[i]) > 1e-5) {
                throw new IllegalStateException(method + ": element " + i + " is " + got[i] + ", the float64 sum "
                        + reference[i]);
            }
        }
    }

    private Timing sparkccl(JavaSparkContext jsc, List<Integer> ids, int count) {
        int timed = iters;
        int untimed = warmup;
        List<Timing> perRank = SparkCclJobs.barrierMapPartitions(jsc.parallelize(ids, ranks), part -> {
            long start = System.nanoTime();
            Communicator comm = SparkCcl.communicator();
            double setupMs = (System.nanoTime() - start) / 1e6;
            float[] mine = vector(comm.rank(), count);
            ByteBuffer direct = ByteBuffer.allocateDirect(count * 4).order(ByteOrder.nativeOrder());
            FloatBuffer floats = direct.asFloatBuffer();
            double[] steps = new double[timed];
            for (int i = 0; i < untimed + timed; i++) {
                floats.clear();
                floats.put(mine); // a fresh gradient each step, outside the timing
                comm.barrier();
                long t0 = System.nanoTime();
                comm.allReduce(direct, DataType.FLOAT32, ReduceOp.SUM);
                if (i >= untimed) {
                    steps[i - untimed] = (System.nanoTime() - t0) / 1e6;
                }
            }
            float[] result = new float[count];
            floats.clear();
            floats.get(result);
            if (comm.rank() == 0) {
                check("sparkccl", result, reference(comm.size(), count));
            }
            return List.of(new Timing(steps, setupMs)).iterator();
        }).collect();
        return Timing.slowestRank(perRank);
    }

    private Timing treeAggregate(JavaRDD<float[]> vectors, int count, double[] reference) {
        double[] steps = new double[iters];
        float[] sum = null;
        for (int i = 0; i < warmup + iters; i++) {
            long t0 = System.nanoTime();
            // A null zero value, so that Spark does not ship a zero vector to every task.
            sum = vectors.treeAggregate(null, SparkAllReduceBench::addInto, SparkAllReduceBench::addInto, 2);
            if (i >= warmup) {
                steps[i - warmup] = (System.nanoTime() - t0) / 1e6;
            }
        }
        check("treeAggregate", sum, reference);
        return new Timing(steps, 0);
    }

    static float[] addInto(float[] acc, float[] v) {
        if (acc == null) {
            return v == null ? null : v.clone();
        }
        if (v != null) {
            for (int i = 0; i < acc.length; i++) {
                acc[i] += v[i];
            }
        }
        return acc;
    }

    private Timing allGather(JavaSparkContext jsc, List<Integer> ids, int count) {
        int timed = allGatherIters;
        int untimed = Math.min(warmup, 1);
        List<Timing> perRank = SparkCclJobs.barrierMapPartitions(jsc.parallelize(ids, ranks), part -> {
            BarrierTaskContext context = BarrierTaskContext.get();
            int rank = context.partitionId();
            float[] mine = vector(rank, count);
            ByteBuffer bytes = ByteBuffer.allocate(count * 4).order(ByteOrder.LITTLE_ENDIAN);
            bytes.asFloatBuffer().put(mine);
            double[] steps = new double[timed];
            float[] sum = new float[count];
            for (int i = 0; i < untimed + timed; i++) {
                long t0 = System.nanoTime();
                String[] all = context.allGather(Base64.getEncoder().encodeToString(bytes.array()));
                java.util.Arrays.fill(sum, 0f);
                for (String s : all) {
                    FloatBuffer theirs = ByteBuffer.wrap(Base64.getDecoder().decode(s)).order(ByteOrder.LITTLE_ENDIAN)
                            .asFloatBuffer();
                    for (int k = 0; k < count; k++) {
                        sum[k] += theirs.get(k);
                    }
                }
                if (i >= untimed) {
                    steps[i - untimed] = (System.nanoTime() - t0) / 1e6;
                }
            }
            if (rank == 0) {
                check("allGather", sum, reference(context.numPartitions(), count));
            }
            return List.of(new Timing(steps, 0)).iterator();
        }).collect();
        return Timing.slowestRank(perRank);
    }
}
