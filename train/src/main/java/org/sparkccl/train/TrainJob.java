package org.sparkccl.train;

import org.sparkccl.spark.QuietLogs;
import org.sparkccl.spark.SparkCcl;
import org.sparkccl.spark.SparkCclJobs;
import org.sparkccl.spark.SparkCclPlugin;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Locale;
import java.util.concurrent.Callable;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.spark.BarrierTaskContext;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.slf4j.LoggerFactory;
import org.sparkccl.core.Communicator;
import org.sparkccl.train.plot.Charts;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * Data-parallel training on Spark: softmax regression or a small MLP, minibatch SGD with momentum
 * or Adam, one barrier task per rank, gradients summed by sparkccl's all-reduce every step.
 *
 * <pre>
 *   bin/train --ranks 4                                  # embedded local Spark, bundled digits
 *   bin/train --ranks 4 --reference --plot loss.png      # and the loss curves, against one process, as PNG
 *   spark-submit --class org.sparkccl.train.TrainJob train/target/sparkccl-spark-app-VERSION.jar --data hdfs:///x.parquet
 * </pre>
 */
@Command(name = "train", mixinStandardHelpOptions = true, sortOptions = false,
        description = "Trains a classifier on a DataFrame with one Spark barrier task per rank, all-reducing "
                + "gradients with sparkccl every step.")
public final class TrainJob implements Callable<Integer> {
    @Option(names = "--ranks", defaultValue = "4", description = "barrier tasks (one per GPU where there are GPUs) [${DEFAULT-VALUE}]")
    int ranks;
    @Option(names = "--master", description = "Spark master; default: spark-submit's, else an embedded local[RANKS]")
    String master;
    @Option(names = "--data", defaultValue = TrainingData.DIGITS,
            description = "'digits' (bundled handwritten digits), a path, or a table name with --format table [${DEFAULT-VALUE}]")
    String data;
    @Option(names = "--format", defaultValue = "auto", description = "auto, parquet, csv, json, orc or table [${DEFAULT-VALUE}]")
    String format;
    @Option(names = "--csv-header", description = "the CSV's first line names the columns")
    boolean csvHeader;
    @Option(names = "--features-col", description = "array or ML vector column; default 'features', else every numeric column but the label")
    String featuresColumn;
    @Option(names = "--label-col", description = "class index column; default 'label', else the last column")
    String labelColumn;
    @Option(names = "--validation-fraction", defaultValue = "0.2",
            description = "fraction of the rows held out (a split seeded by --seed) to report validation loss and accuracy on; 0: none [${DEFAULT-VALUE}]")
    double validationFraction;
    @Option(names = "--model", defaultValue = "mlp", description = "softmax or mlp [${DEFAULT-VALUE}]")
    String model;
    @Option(names = "--hidden", defaultValue = "32", split = ",",
            description = "hidden units of the MLP, one number per hidden layer (64,32: two) [${DEFAULT-VALUE}]")
    int[] hidden;
    @Option(names = "--optimizer", defaultValue = "adam", description = "sgd (with momentum) or adam [${DEFAULT-VALUE}]")
    String optimizer;
    @Option(names = "--lr", description = "learning rate; default 0.01 for adam, 0.1 for sgd")
    Double learningRate;
    @Option(names = "--momentum", defaultValue = "0.9", description = "SGD momentum [${DEFAULT-VALUE}]")
    double momentum;
    @Option(names = "--batch-size", defaultValue = "128", description = "global minibatch, all ranks together [${DEFAULT-VALUE}]")
    int batchSize;
    @Option(names = "--steps", defaultValue = "300", description = "steps to train (counting those of a resumed checkpoint) [${DEFAULT-VALUE}]")
    long steps;
    @Option(names = "--seed", defaultValue = "1", description = "seeds the initial weights and the batch order [${DEFAULT-VALUE}]")
    long seed;
    @Option(names = "--log-every", defaultValue = "25", description = "steps between progress lines [${DEFAULT-VALUE}]")
    int logEvery;
    @Option(names = "--checkpoint-dir", description = "Hadoop path (file://, hdfs://, ...) for checkpoints")
    String checkpointDir;
    @Option(names = "--checkpoint-every", defaultValue = "100", description = "steps between checkpoints [${DEFAULT-VALUE}]")
    long checkpointEvery;
    @Option(names = "--resume", description = "continue from the newest checkpoint in --checkpoint-dir, if there is one")
    boolean resume;
    @Option(names = "--reference", description = "also train in this process alone and compare the loss curves")
    boolean reference;
    @Option(names = "--plot", paramLabel = "FILE", description = "draw the loss curve (and the reference's, with --reference) into FILE as PNG")
    Path plot;
    @Option(names = "--compute", defaultValue = "auto",
            description = "where ranks compute their steps: auto (the GPU where the task has one), cpu or gpu [${DEFAULT-VALUE}]")
    String compute;

    public static void main(String[] args) {
        System.exit(new CommandLine(new TrainJob()).execute(args));
    }

    @Override
    public Integer call() throws IOException {
        boolean embedded = master == null && System.getProperty("spark.master") == null;
        SparkSession.Builder builder = SparkSession.builder().appName("sparkccl TrainJob");
        if (master != null || embedded) {
            builder.master(master != null ? master : "local[" + ranks + "]");
        }
        String plugins = System.getProperty("spark.plugins", "");
        if (!plugins.contains(SparkCclPlugin.class.getName())) {
            builder.config("spark.plugins", plugins.isEmpty() ? SparkCclPlugin.class.getName()
                    : plugins + "," + SparkCclPlugin.class.getName());
        }
        if (embedded) {
            builder.config("spark.ui.enabled", "false");
            QuietLogs.forEmbeddedRun();
        }
        SparkSession spark = builder.getOrCreate();
        try {
            Dataset<Row>[] split = splitForValidation(TrainingData.read(spark, data, format, csvHeader),
                    validationFraction, seed);
            PreparedData prepared = PreparedData.of(split[0], featuresColumn, labelColumn, ranks);
            DataStats stats = prepared.stats();
            TrainConfig config = config(stats, spark);
            System.out.printf(Locale.ROOT, "sparkccl TrainJob: %s on %s (%d training examples%s, %d features, %d classes),"
                            + " %d ranks%n", config, data, stats.rows(), split.length > 1
                            ? String.format(Locale.ROOT, ", a fraction %.2f held out for validation", validationFraction) : "",
                    stats.cols(), stats.classes(), ranks);
            TrainResult result = train(prepared, config);
            String validation = "";
            if (split.length > 1) {
                TrainedClassifier.Evaluation held = TrainedClassifier.of(config, stats, result)
                        .evaluate(TrainingData.examples(split[1], featuresColumn, labelColumn));
                validation = String.format(Locale.ROOT, "; validation set (%d held-out examples): loss %.5f, accuracy %.4f",
                        held.rows(), held.loss(), held.accuracy());
            }
            System.out.printf(Locale.ROOT, "trained steps %d..%d: last minibatch loss %.5f; whole training set: loss %.5f,"
                            + " accuracy %.4f; %.0f samples/s%s%n", result.firstStep(), config.steps(),
                    lastLoss(result), result.finalLoss(), result.accuracy(), result.samplesPerSecond(), validation);
            Map<String, TrainResult> curves = new LinkedHashMap<>();
            curves.put(ranks + " ranks", result);
            if (reference) {
                TrainResult single = trainSingleProcess(prepared.collectAll(), stats, config);
                double diff = maxRelativeDifference(result.losses(), single.losses());
                System.out.printf(Locale.ROOT, "single-process reference: loss %.5f, accuracy %.4f; largest relative loss"
                        + " difference over %d steps: %.2e%n", single.finalLoss(), single.accuracy(),
                        single.losses().length, diff);
                curves.put("single process (reference)", single);
            }
            if (plot != null) {
                Charts.writePng(LossChart.of("sparkccl TrainJob: " + config.model(), curves), plot);
                System.out.println("loss curve: " + plot);
            }
            prepared.release();
            return 0;
        } finally {
            spark.stop();
        }
    }

    /**
     * {training rows, validation rows}: a random split seeded by {@code seed} (the same rows for the
     * same data and seed), or {training rows} alone where {@code fraction} is 0.
     */
    public static Dataset<Row>[] splitForValidation(Dataset<Row> frame, double fraction, long seed) {
        if (!(fraction >= 0 && fraction < 1)) {
            throw new IllegalArgumentException("--validation-fraction " + fraction + ": use a fraction in [0, 1), 0 for no"
                    + " validation set");
        }
        if (fraction == 0) {
            @SuppressWarnings("unchecked")
            Dataset<Row>[] all = new Dataset[] {frame};
            return all;
        }
        return frame.randomSplit(new double[] {1 - fraction, fraction}, seed);
    }

    private static double lastLoss(TrainResult r) {
        double[] l = r.losses();
        return l.length == 0 ? Double.NaN : l[l.length - 1];
    }

    TrainConfig config(DataStats stats, SparkSession spark) {
        ModelSpec spec = new ModelSpec(ModelSpec.Kind.parse(model), stats.cols(), hidden, stats.classes());
        OptimizerSpec.Kind kind = OptimizerSpec.Kind.parse(optimizer);
        double lr = learningRate != null ? learningRate : kind == OptimizerSpec.Kind.ADAM ? 0.01 : 0.1;
        return new TrainConfig(spec, new OptimizerSpec(kind, lr, momentum), batchSize, steps, seed, logEvery,
                checkpointDir, checkpointEvery, resume,
                PreparedData.hadoopSettings(spark.sparkContext().getConf(), spark.sparkContext().hadoopConfiguration()))
                .withCompute(ComputePath.Choice.parse(compute));
    }

    /**
     * Trains with one barrier task per rank and returns rank 0's result, after checking that every
     * rank ended with the same weights (they apply the same updates to the same all-reduced gradients).
     *
     * <p>The stage is retryable ({@link SparkCclJobs#retryableBarrierMapPartitions}): when an executor
     * is lost or a rank fails, Spark runs it again (up to {@code spark.stage.maxConsecutiveAttempts}
     * attempts), and a retried attempt resumes from the newest checkpoint when there is a checkpoint
     * directory (else from step 0); rank 0 logs "stage attempt k: resuming from checkpoint step N".
     */
    public static TrainResult train(PreparedData prepared, TrainConfig config) {
        DataStats stats = prepared.stats();
        List<TrainResult> results = new ArrayList<>(SparkCclJobs.retryableBarrierMapPartitions(prepared.byRank(), parts -> {
            BarrierTaskContext task = BarrierTaskContext.get();
            TrainConfig attemptConfig = config.forStageAttempt(task.stageAttemptNumber());
            Shard shard = PreparedData.shard(parts, stats, task.partitionId(), task.numPartitions());
            Communicator comm = SparkCcl.communicator();
            try (BufferAllocator allocator = new RootAllocator()) {
                TrainResult result = new Trainer(attemptConfig, shard, (int) stats.rows()).run(StepCollectives.over(comm),
                        allocator, stepEngines(attemptConfig, comm));
                return List.of(result).iterator();
            }
        }).collect());
        results.sort((a, b) -> Integer.compare(a.rank(), b.rank()));
        for (TrainResult r : results) {
            if (!Arrays.equals(r.weights(), results.get(0).weights())) {
                throw new IllegalStateException("rank " + r.rank() + " ended with other weights than rank 0;"
                        + " the all-reduce or the update is not the same on every rank");
            }
        }
        return results.get(0);
    }

    /** Where this task's rank computes its steps: its GPU where its communicator is a GPU one (see {@link ComputePath}). */
    private static StepEngine.Factory stepEngines(TrainConfig config, Communicator comm) {
        ComputePath path = ComputePath.choose(config.compute(), comm.memoryKind(), comm.rank());
        if (path == ComputePath.GPU && !GpuStepEngine.supports(config.model())) {
            if (config.compute() == ComputePath.Choice.GPU) {
                throw new IllegalArgumentException("rank " + comm.rank() + ": --compute gpu, but the GPU kernels train"
                        + " softmax regression and MLPs of one hidden layer, not " + config.model()
                        + "; use --compute auto or cpu, or one hidden layer");
            }
            LoggerFactory.getLogger(TrainJob.class).info("rank {}: the GPU kernels train MLPs of one hidden layer, not {}:"
                    + " its steps run on the CPU", comm.rank(), config.model());
            return StepEngines.cpu();
        }
        return path == ComputePath.GPU ? StepEngines.gpu(comm, SparkCcl.gpu().ordinal()) : StepEngines.cpu();
    }

    /** The same training in this process alone, on every example: the reference the distributed run must match. */
    public static TrainResult trainSingleProcess(List<Example> all, DataStats stats, TrainConfig config) {
        FeatureBatch batch = TrainingData.batch(all.iterator(), stats);
        try (BufferAllocator allocator = new RootAllocator()) {
            return new Trainer(config.withSteps(config.steps(), null, 1, false), new Shard(batch, 0, 1, batch.rows()),
                    batch.rows()).run(StepCollectives.singleProcess(), allocator);
        }
    }

    /** Largest |a - b| / max(|b|, 1e-3) over the common steps. */
    public static double maxRelativeDifference(double[] a, double[] b) {
        double worst = 0;
        for (int i = 0; i < Math.min(a.length, b.length); i++) {
            worst = Math.max(worst, Math.abs(a[i] - b[i]) / Math.max(Math.abs(b[i]), 1e-3));
        }
        return worst;
    }
}
