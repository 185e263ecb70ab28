package org.sparkccl.spark.ml;

import java.io.Serializable;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.apache.spark.ml.classification.ProbabilisticClassifier;
import org.apache.spark.ml.linalg.Vector;
import org.apache.spark.ml.param.DoubleParam;
import org.apache.spark.ml.param.IntArrayParam;
import org.apache.spark.ml.param.IntParam;
import org.apache.spark.ml.param.LongParam;
import org.apache.spark.ml.param.Param;
import org.apache.spark.ml.param.ParamMap;
import org.apache.spark.ml.param.ParamValidators;
import org.apache.spark.ml.util.DefaultParamsReader;
import org.apache.spark.ml.util.DefaultParamsWritable;
import org.apache.spark.ml.util.DefaultParamsWriter;
import org.apache.spark.ml.util.Identifiable;
import org.apache.spark.ml.util.MLReader;
import org.apache.spark.ml.util.MLWriter;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.sparkccl.core.engine.Engines;
import org.sparkccl.spark.SparkConfCheck;
import org.sparkccl.train.DataStats;
import org.sparkccl.train.ModelSpec;
import org.sparkccl.train.OptimizerSpec;
import org.sparkccl.train.PreparedData;
import org.sparkccl.train.TrainConfig;
import org.sparkccl.train.TrainJob;
import org.sparkccl.train.TrainResult;
import org.sparkccl.train.TrainedClassifier;
import scala.runtime.AbstractFunction1;

/**
 * A Spark ML {@code Estimator}: a multilayer perceptron (tanh hidden layers, softmax output) or,
 * with no hidden layers, softmax regression, trained data-parallel by sparkccl on the same trainer
 * as {@link TrainJob}: one barrier task per rank, gradients all-reduced every step, on the GPUs where
 * the tasks have them, checkpoints where {@code checkpointDir} is set, in a barrier stage Spark
 * retries when a rank fails.
 *
 * <pre>{@code
 * SparkCclMlpClassifier mlp = new SparkCclMlpClassifier().setHiddenLayers(new int[] {32}).setMaxIter(300);
 * SparkCclMlpClassificationModel model = mlp.fit(train);       // one barrier stage
 * Dataset<Row> scored = model.transform(test);                  // rawPrediction, probability, prediction
 * }</pre>
 *
 * <p>Params, with Spark's names where Spark has one: {@code featuresCol} (an ML {@code Vector}),
 * {@code labelCol} (class indices 0, 1, ...), {@code predictionCol}, {@code probabilityCol},
 * {@code rawPredictionCol}, {@code thresholds}, {@code maxIter} (steps), {@code stepSize} (learning
 * rate), {@code seed} (initial weights and batch order), {@code batchSize} (global minibatch),
 * {@code checkpointDir} and {@code checkpointInterval}, {@code hiddenLayers}, {@code optimizer}
 * ("adam" or "sgd" with momentum 0.9) and {@code numRanks} (barrier tasks; 0: one per GPU, else the
 * default parallelism). Features are divided by each one's largest magnitude in the training data
 * (the model keeps those and applies them when it scores), as TrainJob does.
 */
public final class SparkCclMlpClassifier
        extends ProbabilisticClassifier<Vector, SparkCclMlpClassifier, SparkCclMlpClassificationModel>
        implements DefaultParamsWritable {
    private static final long serialVersionUID = 1L;
    private static final Logger LOG = LoggerFactory.getLogger(SparkCclMlpClassifier.class);

    // First field: the uid, before the params below are made with this as their owner (ConstructionUid).
    private final String uid = ConstructionUid.take();

    private final IntParam maxIter = new IntParam(this, "maxIter", "training steps (>= 1)", ParamValidators.gtEq(1));
    private final DoubleParam stepSize = new DoubleParam(this, "stepSize",
            "learning rate (> 0); about 0.01 suits adam, 0.1 sgd", ParamValidators.gt(0));
    private final LongParam seed = new LongParam(this, "seed", "seeds the initial weights and the batch order");
    private final IntParam batchSize = new IntParam(this, "batchSize",
            "global minibatch: rows per step, all ranks together (>= 1)", ParamValidators.gtEq(1));
    private final Param<String> checkpointDir = new Param<>(this, "checkpointDir",
            "Hadoop directory (file://, hdfs://, ...) for checkpoints, from which a retried stage resumes; empty: none");
    private final IntParam checkpointInterval = new IntParam(this, "checkpointInterval",
            "steps between checkpoints where checkpointDir is set (>= 1)", ParamValidators.gtEq(1));
    private final IntArrayParam hiddenLayers = new IntArrayParam(this, "hiddenLayers",
            "widths of the hidden layers, first to last (each >= 1); empty: softmax regression", new PositiveWidths());
    private final Param<String> optimizer = new Param<>(this, "optimizer", "adam, or sgd (with momentum 0.9)",
            ParamValidators.inArray(List.of("adam", "sgd")));
    private final IntParam numRanks = new IntParam(this, "numRanks",
            "barrier tasks (sparkccl ranks); 0: one per GPU where Spark has GPUs, else the default parallelism",
            ParamValidators.gtEq(0));

    public SparkCclMlpClassifier() {
        this(Identifiable.randomUID("sparkcclMlp"));
    }

    public SparkCclMlpClassifier(String uid) {
        this(ConstructionUid.begin(uid));
    }

    private SparkCclMlpClassifier(ConstructionUid.Token token) {
        setDefault(maxIter, 300);
        setDefault(stepSize, 0.01);
        setDefault(seed, 1L);
        setDefault(batchSize, 128);
        setDefault(checkpointDir, "");
        setDefault(checkpointInterval, 100);
        setDefault(hiddenLayers, new int[] {32});
        setDefault(optimizer, "adam");
        setDefault(numRanks, 0);
    }

    @Override
    public String uid() {
        return uid != null ? uid : ConstructionUid.current();
    }

    public IntParam maxIter() {
        return maxIter;
    }

    public DoubleParam stepSize() {
        return stepSize;
    }

    public LongParam seed() {
        return seed;
    }

    public IntParam batchSize() {
        return batchSize;
    }

    public Param<String> checkpointDir() {
        return checkpointDir;
    }

    public IntParam checkpointInterval() {
        return checkpointInterval;
    }

    public IntArrayParam hiddenLayers() {
        return hiddenLayers;
    }

    public Param<String> optimizer() {
        return optimizer;
    }

    public IntParam numRanks() {
        return numRanks;
    }

    public int getMaxIter() {
        return (Integer) getOrDefault(maxIter);
    }

    public double getStepSize() {
        return (Double) getOrDefault(stepSize);
    }

    public long getSeed() {
        return (Long) getOrDefault(seed);
    }

    public int getBatchSize() {
        return (Integer) getOrDefault(batchSize);
    }

    public String getCheckpointDir() {
        return getOrDefault(checkpointDir);
    }

    public int getCheckpointInterval() {
        return (Integer) getOrDefault(checkpointInterval);
    }

    public int[] getHiddenLayers() {
        return getOrDefault(hiddenLayers).clone();
    }

    public String getOptimizer() {
        return getOrDefault(optimizer);
    }

    public int getNumRanks() {
        return (Integer) getOrDefault(numRanks);
    }

    public SparkCclMlpClassifier setMaxIter(int value) {
        return (SparkCclMlpClassifier) set(maxIter, value);
    }

    public SparkCclMlpClassifier setStepSize(double value) {
        return (SparkCclMlpClassifier) set(stepSize, value);
    }

    public SparkCclMlpClassifier setSeed(long value) {
        return (SparkCclMlpClassifier) set(seed, value);
    }

    public SparkCclMlpClassifier setBatchSize(int value) {
        return (SparkCclMlpClassifier) set(batchSize, value);
    }

    public SparkCclMlpClassifier setCheckpointDir(String value) {
        return (SparkCclMlpClassifier) set(checkpointDir, value == null ? "" : value);
    }

    public SparkCclMlpClassifier setCheckpointInterval(int value) {
        return (SparkCclMlpClassifier) set(checkpointInterval, value);
    }

    public SparkCclMlpClassifier setHiddenLayers(int[] value) {
        return (SparkCclMlpClassifier) set(hiddenLayers, value.clone());
    }

    public SparkCclMlpClassifier setOptimizer(String value) {
        return (SparkCclMlpClassifier) set(optimizer, value == null ? null : value.toLowerCase(Locale.ROOT));
    }

    public SparkCclMlpClassifier setNumRanks(int value) {
        return (SparkCclMlpClassifier) set(numRanks, value);
    }

    @Override
    public SparkCclMlpClassifier copy(ParamMap extra) {
        return defaultCopy(extra);
    }

    /**
     * Trains in one retryable barrier stage of {@link #getNumRanks()} tasks (after two small jobs
     * that number the rows and take their statistics) and returns the fitted model, whose
     * {@code summary()} holds the loss of every step.
     */
    @Override
    public SparkCclMlpClassificationModel train(Dataset<?> dataset) {
        SparkSession spark = dataset.sparkSession();
        int ranks = getNumRanks() > 0 ? getNumRanks() : defaultRanks(spark.sparkContext());
        Dataset<Row> frame = dataset.select(getFeaturesCol(), getLabelCol());
        PreparedData prepared = PreparedData.of(frame, getFeaturesCol(), getLabelCol(), ranks);
        try {
            DataStats stats = prepared.stats();
            TrainConfig config = config(stats, spark).withoutTrainingSetEvaluation();
            LOG.info("{}: training {} on {} rows with {} ranks", uid(), config, stats.rows(), ranks);
            TrainResult result = TrainJob.train(prepared, config);
            TrainedClassifier classifier = TrainedClassifier.of(config, stats, result);
            SparkCclMlpTrainingSummary summary = new SparkCclMlpTrainingSummary(result.losses(), ranks, stats.rows(),
                    classifier, frame, getFeaturesCol(), getLabelCol());
            return new SparkCclMlpClassificationModel(uid(), classifier, summary);
        } finally {
            prepared.release();
        }
    }

    private TrainConfig config(DataStats stats, SparkSession spark) {
        ModelSpec spec;
        try {
            spec = ModelSpec.of(stats.cols(), getHiddenLayers(), stats.classes());
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(uid() + ": the data (labelCol '" + getLabelCol() + "', featuresCol '"
                    + getFeaturesCol() + "') and hiddenLayers " + Arrays.toString(getHiddenLayers())
                    + " make no model: " + e.getMessage(), e);
        }
        OptimizerSpec.Kind kind = OptimizerSpec.Kind.parse(getOptimizer());
        String dir = getCheckpointDir().isEmpty() ? null : fitCheckpointDir(getCheckpointDir());
        return new TrainConfig(spec, new OptimizerSpec(kind, getStepSize(), 0.9), getBatchSize(), getMaxIter(), getSeed(),
                Math.max(1, getMaxIter() / 10), dir, getCheckpointInterval(), false,
                PreparedData.hadoopSettings(spark.sparkContext().getConf(), spark.sparkContext().hadoopConfiguration()));
    }

    /**
     * A directory of its own under {@code checkpointDir} for each fit: a retried stage resumes from
     * this fit's checkpoints, never from another's (CrossValidator fits many models with one dir).
     */
    private String fitCheckpointDir(String base) {
        return base.replaceAll("/+$", "") + "/" + uid() + "-" + System.currentTimeMillis() + "-"
                + Long.toHexString(Double.doubleToLongBits(Math.random()));
    }

    /**
     * One rank per GPU that Spark schedules (executors x {@code spark.executor.resource.gpu.amount}),
     * or per visible GPU in local mode; without GPUs, Spark's default parallelism.
     */
    static int defaultRanks(SparkContext sc) {
        SparkConf conf = sc.getConf();
        int gpusPerExecutor = conf.getInt("spark.executor.resource.gpu.amount", 0);
        if (gpusPerExecutor > 0 && conf.contains("spark.task.resource.gpu.amount")) {
            int executors = conf.getInt("spark.executor.instances", Math.max(1, sc.getExecutorMemoryStatus().size() - 1));
            return executors * gpusPerExecutor;
        }
        if (SparkConfCheck.isLocalMaster(sc.master())) {
            int gpus = Engines.visibleGpus();
            if (gpus > 0) {
                return gpus;
            }
        }
        return sc.defaultParallelism();
    }

    @Override
    public MLWriter write() {
        return new DefaultParamsWriter(this);
    }

    public static MLReader<SparkCclMlpClassifier> read() {
        return new DefaultParamsReader<>();
    }

    public static SparkCclMlpClassifier load(String path) {
        return read().load(path);
    }

    /** hiddenLayers' check: every width at least 1 (no layers at all is softmax regression). */
    private static final class PositiveWidths extends AbstractFunction1<int[], Object> implements Serializable {
        private static final long serialVersionUID = 1L;

        @Override
        public Object apply(int[] widths) {
            return Arrays.stream(widths).allMatch(w -> w >= 1);
        }
    }
}
