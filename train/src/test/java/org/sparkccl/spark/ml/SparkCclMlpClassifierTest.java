package org.sparkccl.spark.ml;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.spark.ml.Pipeline;
import org.apache.spark.ml.PipelineModel;
import org.apache.spark.ml.PipelineStage;
import org.apache.spark.ml.evaluation.MulticlassClassificationEvaluator;
import org.apache.spark.ml.feature.StandardScaler;
import org.apache.spark.ml.feature.VectorAssembler;
import org.apache.spark.ml.param.ParamMap;
import org.apache.spark.ml.tuning.CrossValidator;
import org.apache.spark.ml.tuning.CrossValidatorModel;
import org.apache.spark.ml.tuning.ParamGridBuilder;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.sparkccl.spark.SparkTestSupport;
import org.sparkccl.train.ModelSpec;
import org.sparkccl.train.OptimizerSpec;
import org.sparkccl.train.PreparedData;
import org.sparkccl.train.TrainConfig;
import org.sparkccl.train.TrainJob;
import org.sparkccl.train.TrainResult;
import org.sparkccl.train.TrainedClassifier;
import org.sparkccl.train.TrainingData;

/**
 * The Estimator as Spark ML users use it, on the bundled digits: fit and transform, the same weights
 * as TrainJob's trainer, params and their checks, a Pipeline inside a CrossValidator, and a saved
 * model that a fresh JVM loads and scores identically. One Spark session for the class.
 */
class SparkCclMlpClassifierTest {
    private static final Path JVM_OPTIONS = Path.of("../scripts/spark-jvm-options");
    private static final Path SPARK_DOC = Path.of("../docs/spark.md");
    private static final Path EXAMPLE_SOURCE = Path.of("src/test/java/org/sparkccl/spark/ml/SparkMlDocExample.java");
    private static SparkSession spark;
    private static Dataset<Row> train;
    private static Dataset<Row> test;

    @BeforeAll
    static void start() {
        spark = SparkSession.builder().config(SparkTestSupport.localConf(4, "sparkccl-ml")).getOrCreate();
        Dataset<Row>[] split = MlTestData.digitsVectors(spark).randomSplit(new double[] {0.8, 0.2}, 7);
        train = split[0].cache();
        test = split[1].cache();
    }

    @AfterAll
    static void stop() {
        spark.stop();
    }

    private static final MulticlassClassificationEvaluator ACCURACY = new MulticlassClassificationEvaluator()
            .setMetricName("accuracy");

    @Test
    void fitTrainsAsTrainJobDoesAndTransformScoresOnAnyPartitioning() {
        SparkCclMlpClassifier mlp = new SparkCclMlpClassifier().setHiddenLayers(new int[] {16}).setMaxIter(150)
                .setNumRanks(2).setSeed(3);
        SparkCclMlpClassificationModel model = mlp.fit(train);

        double[] losses = model.summary().lossHistory();
        assertEquals(150, losses.length);
        assertTrue(losses[losses.length - 1] < losses[0] / 4, "loss fell from " + losses[0] + " to " + losses[losses.length - 1]);
        assertEquals(10, model.numClasses());
        assertEquals(64, model.numFeatures());
        assertEquals(mlp.uid(), model.uid());
        assertEquals(mlp, model.parent());

        // The same trainer as TrainJob: the same config there gives the same weights, bit for bit.
        PreparedData prepared = PreparedData.of(train.select("features", "label"), "features", "label", 2);
        TrainConfig config = new TrainConfig(new ModelSpec(ModelSpec.Kind.MLP, 64, 16, 10),
                new OptimizerSpec(OptimizerSpec.Kind.ADAM, 0.01, 0.9), 128, 150, 3, 15, null, 100, false, java.util.Map.of());
        TrainResult direct = TrainJob.train(prepared, config);
        prepared.release();
        assertArrayEquals(direct.weights(), model.weights());

        Dataset<Row> scored = model.transform(test);
        assertTrue(List.of(scored.columns()).containsAll(List.of("rawPrediction", "probability", "prediction")));
        double accuracy = ACCURACY.evaluate(scored);
        assertTrue(accuracy > 0.9, "held-out accuracy " + accuracy);
        // Plain tasks: as many partitions as the data has, and the same answers however it is split.
        assertEquals(SavedModelScorer.lines(scored), SavedModelScorer.lines(model.transform(test.repartition(5))));
        assertEquals(SavedModelScorer.lines(scored), SavedModelScorer.lines(model.transform(test.coalesce(1))));
        // TrainJob's validation figures (TrainedClassifier.evaluate) are Spark's evaluator's on the same rows.
        TrainedClassifier.Evaluation held = model.classifier().evaluate(TrainingData.examples(test, "features", "label"));
        assertEquals(test.count(), held.rows());
        assertEquals(accuracy, held.accuracy(), 1e-12);
        // The training-set figures, computed when asked for (the fit itself skips that pass).
        assertTrue(model.summary().trainingAccuracy() > 0.95, "training accuracy " + model.summary().trainingAccuracy());
        assertTrue(model.summary().trainingLoss() < losses[0] / 4, "training loss " + model.summary().trainingLoss());
    }

    @Test
    void theBlockReaderReadsWhatTheRowReaderReads() {
        // ML vectors, every other row sparse, on 3 ranks (the shuffle by id modulo ranks); numeric
        // columns on a partition per rank (no shuffle). (array<float> is what TrainJob's digits are.)
        org.apache.spark.sql.Column sparse = org.apache.spark.sql.functions.udf(
                (org.apache.spark.sql.api.java.UDF1<org.apache.spark.ml.linalg.Vector, org.apache.spark.ml.linalg.Vector>)
                        org.apache.spark.ml.linalg.Vector::toSparse, org.apache.spark.ml.linalg.SQLDataTypes.VectorType())
                .apply(train.col("features"));
        Dataset<Row> vectors = train.withColumn("features", org.apache.spark.sql.functions
                .when(train.col("id").mod(2).equalTo(0), sparse).otherwise(train.col("features"))).drop("id");
        org.apache.spark.sql.Column pixels = org.apache.spark.ml.functions.vector_to_array(train.col("features"), "float64");
        Dataset<Row> numeric = train.select(pixels.getItem(20).as("p20"), pixels.getItem(35).as("p35"), train.col("label"));
        for (Dataset<Row> data : List.of(vectors, numeric)) {
            String featuresCol = data == numeric ? null : "features";
            int ranks = data == numeric ? data.rdd().getNumPartitions() : 3;
            PreparedData prepared = PreparedData.of(data, featuresCol, "label", ranks);
            List<org.sparkccl.train.Example> blocks = prepared.collectAll();
            prepared.release();
            List<org.sparkccl.train.Example> rows = TrainingData.examples(data, featuresCol, "label").collect();
            assertEquals(rows.size(), blocks.size());
            for (int i = 0; i < rows.size(); i++) {
                assertEquals(rows.get(i).id(), blocks.get(i).id());
                assertArrayEquals(rows.get(i).features(), blocks.get(i).features(), "row " + i);
                assertEquals(rows.get(i).label(), blocks.get(i).label());
            }
        }
    }

    @Test
    void trainJobsValidationSplitIsSeededAndChecked() {
        Dataset<Row> digits = MlTestData.digitsVectors(spark);
        Dataset<Row>[] a = TrainJob.splitForValidation(digits, 0.2, 1);
        Dataset<Row>[] b = TrainJob.splitForValidation(digits, 0.2, 1);
        assertEquals(a[1].select("id").collectAsList(), b[1].select("id").collectAsList());
        long held = a[1].count();
        assertEquals(1797, a[0].count() + held);
        assertTrue(held > 0.15 * 1797 && held < 0.25 * 1797, held + " rows held out");
        assertEquals(1, TrainJob.splitForValidation(digits, 0, 1).length);
        IllegalArgumentException bad = assertThrows(IllegalArgumentException.class,
                () -> TrainJob.splitForValidation(digits, 1, 1));
        assertTrue(bad.getMessage().contains("--validation-fraction"), bad.getMessage());
    }

    @Test
    void paramsHaveSparkNamesDefaultsAndChecksThatNameThem() {
        SparkCclMlpClassifier mlp = new SparkCclMlpClassifier();
        assertEquals(300, mlp.getMaxIter());
        assertEquals(0.01, mlp.getStepSize());
        assertEquals(128, mlp.getBatchSize());
        assertArrayEquals(new int[] {32}, mlp.getHiddenLayers());
        assertEquals("adam", mlp.getOptimizer());
        assertEquals(0, mlp.getNumRanks());
        assertEquals("", mlp.getCheckpointDir());
        assertEquals("features", mlp.getFeaturesCol());
        assertEquals("label", mlp.getLabelCol());
        assertEquals("probability", mlp.getProbabilityCol());
        for (String name : List.of("featuresCol", "labelCol", "predictionCol", "probabilityCol", "rawPredictionCol",
                "maxIter", "stepSize", "seed", "batchSize", "checkpointDir", "hiddenLayers", "optimizer", "numRanks")) {
            assertTrue(mlp.hasParam(name), name);
        }
        assertThrows(IllegalArgumentException.class, () -> mlp.setStepSize(0), "stepSize");
        IllegalArgumentException bad = assertThrows(IllegalArgumentException.class, () -> mlp.setStepSize(-1));
        assertTrue(bad.getMessage().contains("stepSize"), bad.getMessage());
        bad = assertThrows(IllegalArgumentException.class, () -> mlp.setOptimizer("rmsprop"));
        assertTrue(bad.getMessage().contains("optimizer"), bad.getMessage());
        bad = assertThrows(IllegalArgumentException.class, () -> mlp.setHiddenLayers(new int[] {8, 0}));
        assertTrue(bad.getMessage().contains("hiddenLayers"), bad.getMessage());
        bad = assertThrows(IllegalArgumentException.class, () -> mlp.setMaxIter(0));
        assertTrue(bad.getMessage().contains("maxIter"), bad.getMessage());
        bad = assertThrows(IllegalArgumentException.class, () -> mlp.setNumRanks(-1));
        assertTrue(bad.getMessage().contains("numRanks"), bad.getMessage());

        // A ParamMap (as ParamGridBuilder makes them) overrides in a copy, leaving the original alone.
        SparkCclMlpClassifier copy = mlp.copy(new ParamMap().put(mlp.stepSize().w(0.05)).put(mlp.maxIter().w(7)));
        assertEquals(0.05, copy.getStepSize());
        assertEquals(7, copy.getMaxIter());
        assertEquals(0.01, mlp.getStepSize());
    }

    @Test
    void aPipelineInsideACrossValidatorSavesAndLoadsInAFreshJvm(@TempDir Path dir) throws Exception {
        Dataset<Row>[] split = MlTestData.digitsColumns(spark).randomSplit(new double[] {0.8, 0.2}, 7);
        Dataset<Row> trainColumns = split[0].cache();
        Dataset<Row> testColumns = split[1].cache();
        VectorAssembler assembler = new VectorAssembler().setInputCols(MlTestData.pixelColumns()).setOutputCol("pixels");
        StandardScaler scaler = new StandardScaler().setInputCol("pixels").setOutputCol("features");
        SparkCclMlpClassifier mlp = new SparkCclMlpClassifier().setMaxIter(100).setNumRanks(2);
        Pipeline pipeline = new Pipeline().setStages(new PipelineStage[] {assembler, scaler, mlp});
        ParamMap[] grid = new ParamGridBuilder()
                .addGrid(mlp.stepSize(), new double[] {0.001, 0.02})
                .addGrid(mlp.hiddenLayers(), scala.jdk.javaapi.CollectionConverters.asScala(List.of(new int[] {8}, new int[] {32})))
                .build();
        CrossValidator cv = new CrossValidator().setEstimator(pipeline).setEstimatorParamMaps(grid)
                .setEvaluator(ACCURACY).setNumFolds(2).setSeed(5)
                .setParallelism(2); // two fits of 2 barrier tasks at once on local[4]: half the wall time
        CrossValidatorModel fitted = cv.fit(trainColumns);

        double[] metrics = fitted.avgMetrics();
        assertEquals(4, metrics.length);
        // 100 Adam steps at lr 0.001 stop far short of lr 0.02: the grid sees the difference and picks a fast one.
        int best = 0;
        for (int i = 1; i < metrics.length; i++) {
            best = metrics[i] > metrics[best] ? i : best;
        }
        assertEquals(0.02, (double) grid[best].apply(mlp.stepSize()));
        PipelineModel bestPipeline = (PipelineModel) fitted.bestModel();
        Dataset<Row> scored = bestPipeline.transform(testColumns);
        double accuracy = ACCURACY.evaluate(scored);
        assertTrue(accuracy > 0.9, "held-out accuracy " + accuracy + " (cross-validated accuracies " + java.util.Arrays.toString(metrics) + ")");

        // Save: the pipeline (with the fitted scaler and our model), the model alone, the estimator.
        String pipelinePath = dir.resolve("pipeline").toString();
        String modelPath = dir.resolve("model").toString();
        String dataPath = dir.resolve("test.parquet").toString();
        bestPipeline.write().overwrite().save(pipelinePath);
        SparkCclMlpClassificationModel model = (SparkCclMlpClassificationModel) bestPipeline.stages()[2];
        model.write().save(modelPath);
        mlp.write().save(dir.resolve("estimator").toString());
        SparkCclMlpClassifier estimatorBack = SparkCclMlpClassifier.load(dir.resolve("estimator").toString());
        assertEquals(mlp.uid(), estimatorBack.uid());
        assertEquals(100, estimatorBack.getMaxIter());
        assertEquals(2, estimatorBack.getNumRanks());

        Dataset<Row> features = scaler.fit(assembler.transform(trainColumns)).transform(assembler.transform(testColumns));

        // A fresh JVM: nothing of this one's state, the same predictions to the last bit. It starts
        // first and runs while this JVM checks the same loads (its Spark start is most of its time).
        testColumns.write().parquet(dataPath);
        String featuresPath = dir.resolve("features.parquet").toString();
        features.select("id", "features").write().parquet(featuresPath);
        Path pipelineOut = dir.resolve("p.txt");
        Path modelOut = dir.resolve("m.txt");
        Process fresh = startFreshJvm(dir.resolve("fresh-jvm.log"), "pipeline", pipelinePath, dataPath,
                pipelineOut.toString(), "model", modelPath, featuresPath, modelOut.toString());

        try {
            assertEquals(SavedModelScorer.lines(scored),
                    SavedModelScorer.lines(PipelineModel.load(pipelinePath).transform(testColumns)));
            SparkCclMlpClassificationModel back = SparkCclMlpClassificationModel.load(modelPath);
            assertFalse(back.hasSummary());
            assertArrayEquals(model.weights(), back.weights());
            assertEquals(SavedModelScorer.lines(model.transform(features)), SavedModelScorer.lines(back.transform(features)));
            awaitFreshJvm(fresh, dir.resolve("fresh-jvm.log"));
        } finally {
            fresh.destroyForcibly(); // nothing to do when it has ended; else a failed check above leaves none behind
        }
        assertEquals(SavedModelScorer.lines(scored), Files.readAllLines(pipelineOut));
        assertEquals(SavedModelScorer.lines(model.transform(features)), Files.readAllLines(modelOut));
    }

    @Test
    void theDocsExampleRunsAndIsTheOneTheDocsShow(@TempDir Path dir) throws IOException {
        SparkMlDocExample.Outcome outcome = SparkMlDocExample.run(MlTestData.digitsColumns(spark), MlTestData.pixelColumns(),
                dir.resolve("digits-mlp").toString());
        assertTrue(outcome.accuracy() > 0.9, "held-out accuracy " + outcome.accuracy());
        assertEquals(200, outcome.losses().length);
        assertEquals(SavedModelScorer.lines(outcome.scored()),
                SavedModelScorer.lines(PipelineModel.load(dir.resolve("digits-mlp").toString())
                        .transform(MlTestData.digitsColumns(spark).randomSplit(new double[] {0.8, 0.2}, 7)[1])));

        // The method body's indent (8) goes: the page shows the lines in a ```java block.
        List<String> block = SparkTestSupport.markedBlock(EXAMPLE_SOURCE, "docs/spark.md", 8);
        String expected = "```java\n" + String.join("\n", block) + "\n```";
        assertTrue(Files.readString(SPARK_DOC).contains(expected),
                "docs/spark.md must show the example of " + EXAMPLE_SOURCE + " exactly, i.e.:\n" + expected);
    }

    /** Starts {@link SavedModelScorer} in a new JVM with Spark's JVM options and this test's class path. */
    private static Process startFreshJvm(Path log, String... args) throws IOException {
        List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.add("-Xmx512m");
        command.add("-XX:TieredStopAtLevel=1");
        Files.readAllLines(JVM_OPTIONS).stream().filter(l -> !l.isBlank()).forEach(command::add);
        command.add("-cp");
        command.add(SparkTestSupport.absoluteTestClassPath());
        command.add(SavedModelScorer.class.getName());
        command.addAll(List.of(args));
        return new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log.toFile()).start();
    }

    private static void awaitFreshJvm(Process p, Path log) throws IOException, InterruptedException {
        boolean ended = p.waitFor(180, TimeUnit.SECONDS);
        if (!ended) {
            p.destroyForcibly();
        }
        String output = Files.readString(log, StandardCharsets.UTF_8);
        assertTrue(ended && p.exitValue() == 0, "the fresh JVM scoring the saved models failed:\n" + output);
    }
}
