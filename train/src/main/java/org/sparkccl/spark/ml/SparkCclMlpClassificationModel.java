package org.sparkccl.spark.ml;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.ml.classification.ProbabilisticClassificationModel;
import org.apache.spark.ml.linalg.DenseVector;
import org.apache.spark.ml.linalg.Vector;
import org.apache.spark.ml.linalg.Vectors;
import org.apache.spark.ml.param.ParamMap;
import org.apache.spark.ml.util.DefaultParamsReader;
import org.apache.spark.ml.util.DefaultParamsWriter;
import org.apache.spark.ml.util.MLReadable;
import org.apache.spark.ml.util.MLReader;
import org.apache.spark.ml.util.MLWritable;
import org.apache.spark.ml.util.MLWriter;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.sparkccl.train.ModelSpec;
import org.sparkccl.train.TrainedClassifier;
import scala.Option;

/**
 * What {@link SparkCclMlpClassifier#fit} returns: the trained weights, with the feature scaling of
 * the training data. {@code transform} adds {@code rawPrediction} (class scores), {@code probability}
 * (their softmax) and {@code prediction}, scoring row by row inside ordinary tasks on any number of
 * partitions (no barrier stage, no communicator). {@link #write()} saves it (params as Spark's
 * metadata, weights as one Parquet row); {@link #load} reads it back, in any JVM, predicting
 * identically: the weights and scaling are floats stored exactly.
 */
public final class SparkCclMlpClassificationModel
        extends ProbabilisticClassificationModel<Vector, SparkCclMlpClassificationModel> implements MLWritable {
    private static final long serialVersionUID = 1L;

    // First field: the uid, before anything else of this class is made (ConstructionUid).
    private final String uid = ConstructionUid.take();
    private final TrainedClassifier classifier;
    private final transient SparkCclMlpTrainingSummary summary;

    SparkCclMlpClassificationModel(String uid, TrainedClassifier classifier, SparkCclMlpTrainingSummary summary) {
        this(ConstructionUid.begin(uid), classifier, summary);
    }

    private SparkCclMlpClassificationModel(ConstructionUid.Token token, TrainedClassifier classifier,
                                           SparkCclMlpTrainingSummary summary) {
        this.classifier = classifier;
        this.summary = summary;
    }

    @Override
    public String uid() {
        return uid != null ? uid : ConstructionUid.current();
    }

    @Override
    public int numClasses() {
        return classifier.spec().classes();
    }

    @Override
    public int numFeatures() {
        return classifier.spec().inputs();
    }

    /** Widths of the hidden layers (empty: softmax regression). */
    public int[] hiddenLayers() {
        return classifier.spec().hiddenLayers();
    }

    /** The trained parameters, laid out layer by layer: W1 (inputs x width, row-major), b1, W2, b2, ... */
    public float[] weights() {
        return classifier.weights();
    }

    /** The trainer's model: shape, feature scaling and weights. */
    public TrainedClassifier classifier() {
        return classifier;
    }

    public boolean hasSummary() {
        return summary != null;
    }

    /** The loss history and training-set figures of the fit that made this model. */
    public SparkCclMlpTrainingSummary summary() {
        if (summary == null) {
            throw new IllegalStateException(uid() + " has no training summary: it was loaded or copied, not fitted"
                    + " (hasSummary() tells)");
        }
        return summary;
    }

    @Override
    public Vector predictRaw(Vector features) {
        double[] scores = new double[numClasses()];
        classifier.logits(features.toArray(), scores);
        return Vectors.dense(scores);
    }

    /** Softmax of the class scores, in place, as the trainer's loss computes it. */
    @Override
    public Vector raw2probabilityInPlace(Vector rawPrediction) {
        if (!(rawPrediction instanceof DenseVector)) {
            throw new IllegalArgumentException(uid() + ": raw predictions are dense vectors, got "
                    + rawPrediction.getClass().getName());
        }
        TrainedClassifier.probabilitiesInPlace(((DenseVector) rawPrediction).values());
        return rawPrediction;
    }

    /**
     * Spark ML's own. Declared because javac sees it in both Scala parents with return types that
     * differ in a type argument (the raw type is compatible with both).
     */
    @Override
    @SuppressWarnings({"rawtypes", "unchecked"})
    public scala.Tuple3 findSummaryModel() {
        return super.findSummaryModel();
    }

    @Override
    public SparkCclMlpClassificationModel copy(ParamMap extra) {
        SparkCclMlpClassificationModel copy = new SparkCclMlpClassificationModel(uid(), classifier, summary);
        return copyValues(copy, extra).setParent(parent());
    }

    @Override
    public String toString() {
        return "SparkCclMlpClassificationModel: uid=" + uid() + ", " + classifier.spec();
    }

    @Override
    public MLWriter write() {
        return new Writer(this);
    }

    public static MLReader<SparkCclMlpClassificationModel> read() {
        return new Reader();
    }

    public static SparkCclMlpClassificationModel load(String path) {
        return read().load(path);
    }

    /** Data row schema: the model's shape, the feature scaling and the weights. */
    private static final StructType DATA = new StructType()
            .add("kind", DataTypes.StringType, false)
            .add("inputs", DataTypes.IntegerType, false)
            .add("hiddenLayers", DataTypes.createArrayType(DataTypes.IntegerType, false), false)
            .add("classes", DataTypes.IntegerType, false)
            .add("featureMaxAbs", DataTypes.createArrayType(DataTypes.FloatType, false), false)
            .add("weights", DataTypes.createArrayType(DataTypes.FloatType, false), false);

    private static final class Writer extends MLWriter {
        private final SparkCclMlpClassificationModel model;

        Writer(SparkCclMlpClassificationModel model) {
            this.model = model;
        }

        @Override
        public void saveImpl(String path) {
            DefaultParamsWriter.saveMetadata(model, path, sparkSession());
            TrainedClassifier c = model.classifier;
            ModelSpec spec = c.spec();
            List<Integer> hidden = new ArrayList<>();
            for (int h : spec.hiddenLayers()) {
                hidden.add(h);
            }
            Row row = RowFactory.create(spec.kind().name(), spec.inputs(), hidden, spec.classes(),
                    boxed(c.featureMaxAbs()), boxed(c.weights()));
            sparkSession().createDataFrame(List.of(row), DATA).repartition(1).write().parquet(path + "/data");
        }

        private static List<Float> boxed(float[] values) {
            List<Float> out = new ArrayList<>(values.length);
            for (float v : values) {
                out.add(v);
            }
            return out;
        }
    }

    private static final class Reader extends MLReader<SparkCclMlpClassificationModel> {
        @Override
        public SparkCclMlpClassificationModel load(String path) {
            DefaultParamsReader.Metadata metadata = DefaultParamsReader.loadMetadata(path, sparkSession(),
                    SparkCclMlpClassificationModel.class.getName());
            List<Row> rows = sparkSession().read().parquet(path + "/data").collectAsList();
            if (rows.size() != 1) {
                throw new IllegalStateException(path + "/data holds " + rows.size() + " rows, a saved "
                        + SparkCclMlpClassificationModel.class.getSimpleName() + " one: it was not written by its writer");
            }
            Row r = rows.get(0);
            List<Integer> hidden = r.getList(r.fieldIndex("hiddenLayers"));
            int[] widths = hidden.stream().mapToInt(Integer::intValue).toArray();
            ModelSpec spec = new ModelSpec(ModelSpec.Kind.valueOf(r.getString(r.fieldIndex("kind"))),
                    r.getInt(r.fieldIndex("inputs")), widths, r.getInt(r.fieldIndex("classes")));
            TrainedClassifier classifier = new TrainedClassifier(spec, floats(r.getList(r.fieldIndex("featureMaxAbs"))),
                    floats(r.getList(r.fieldIndex("weights"))));
            SparkCclMlpClassificationModel model = new SparkCclMlpClassificationModel(metadata.uid(), classifier, null);
            metadata.getAndSetParams(model, Option.apply(null));
            return model;
        }

        private static float[] floats(List<Object> values) {
            float[] out = new float[values.size()];
            for (int i = 0; i < out.length; i++) {
                out[i] = ((Number) values.get(i)).floatValue();
            }
            return out;
        }
    }
}
