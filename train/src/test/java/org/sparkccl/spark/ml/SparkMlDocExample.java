package org.sparkccl.spark.ml;

import java.io.IOException;
import org.apache.spark.ml.Pipeline;
import org.apache.spark.ml.PipelineModel;
import org.apache.spark.ml.PipelineStage;
import org.apache.spark.ml.evaluation.MulticlassClassificationEvaluator;
import org.apache.spark.ml.feature.StandardScaler;
import org.apache.spark.ml.feature.VectorAssembler;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;

/**
 * docs/spark.md's Estimator example ("Spark ML: an Estimator"): the lines between the markers
 * below must appear in docs/spark.md exactly (in a ```java block, method indent removed), and
 * {@link SparkCclMlpClassifierTest} runs them.
 */
final class SparkMlDocExample {
    private SparkMlDocExample() {
    }

    /** What the example leaves: held-out accuracy, the loss history, where the pipeline was saved. */
    record Outcome(double accuracy, double[] losses, PipelineModel model, Dataset<Row> scored) {
    }

    static Outcome run(Dataset<Row> digits, String[] pixelColumns, String dir) throws IOException {
        // docs/spark.md begin
        VectorAssembler assembler = new VectorAssembler().setInputCols(pixelColumns).setOutputCol("pixels");
        StandardScaler scaler = new StandardScaler().setInputCol("pixels").setOutputCol("features");
        SparkCclMlpClassifier mlp = new SparkCclMlpClassifier()      // featuresCol "features", labelCol "label"
                .setHiddenLayers(new int[] {32}).setMaxIter(200).setStepSize(0.01).setNumRanks(2);
        Pipeline pipeline = new Pipeline().setStages(new PipelineStage[] {assembler, scaler, mlp});

        Dataset<Row>[] split = digits.randomSplit(new double[] {0.8, 0.2}, 7);
        PipelineModel model = pipeline.fit(split[0]);                // the MLP: one barrier stage of 2 ranks
        Dataset<Row> scored = model.transform(split[1]);             // plain tasks: rawPrediction, probability, prediction
        double accuracy = new MulticlassClassificationEvaluator()
                .setMetricName("accuracy").evaluate(scored);         // on held-out rows
        SparkCclMlpClassificationModel fitted = (SparkCclMlpClassificationModel) model.stages()[2];
        double[] losses = fitted.summary().lossHistory();            // one per step

        model.write().overwrite().save(dir);                          // PipelineModel.load(dir), in any JVM
        // docs/spark.md end
        return new Outcome(accuracy, losses, model, scored);
    }
}
