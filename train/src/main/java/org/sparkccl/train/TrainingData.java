package org.sparkccl.train;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.zip.GZIPInputStream;
import org.apache.spark.Partitioner;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.NumericType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import scala.Tuple2;

/**
 * Training data for {@link org.sparkccl.train.TrainJob}: the bundled handwritten digits, or any
 * DataFrame, turned into {@link Example}s with dense global ids and split across ranks by id.
 *
 * <p>Features come from an array column ({@code array<float>}, {@code array<double>}, ...), from a
 * Spark ML vector column (its struct form: type, size, indices, values), or, when no features
 * column is named and there is no column {@code features}, from every numeric column but the label.
 * The label is a class index (0, 1, 2, ...).
 */
public final class TrainingData {
    /** The bundled data set's name for --data. */
    public static final String DIGITS = "digits";
    private static final String DIGITS_RESOURCE = "digits.csv.gz";

    private TrainingData() {
    }

    /** The handwritten digits (1797 rows, 64 pixel features 0..16, label 0..9), as they are bundled. */
    public static List<Example> digitsExamples() {
        List<Example> out = new ArrayList<>();
        try (InputStream raw = TrainingData.class.getResourceAsStream(DIGITS_RESOURCE)) {
            if (raw == null) {
                throw new IllegalStateException(DIGITS_RESOURCE + " is missing from the class path (it ships in the train jar)");
            }
            BufferedReader in = new BufferedReader(new InputStreamReader(new GZIPInputStream(raw), StandardCharsets.US_ASCII));
            String line;
            while ((line = in.readLine()) != null) {
                if (line.isBlank()) {
                    continue;
                }
                String[] cells = line.split(",");
                float[] x = new float[cells.length - 1];
                for (int i = 0; i < x.length; i++) {
                    x[i] = Float.parseFloat(cells[i]);
                }
                out.add(new Example(out.size(), x, Float.parseFloat(cells[cells.length - 1])));
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return out;
    }

    /** The digits as a DataFrame with columns {@code features array<float>} and {@code label double}. */
    public static Dataset<Row> digits(SparkSession spark) {
        List<Row> rows = new ArrayList<>();
        for (Example e : digitsExamples()) {
            Float[] boxed = new Float[e.features.length];
            for (int i = 0; i < boxed.length; i++) {
                boxed[i] = e.features[i];
            }
            rows.add(RowFactory.create(Arrays.asList(boxed), (double) e.label));
        }
        StructType schema = new StructType()
                .add("features", DataTypes.createArrayType(DataTypes.FloatType, false), false)
                .add("label", DataTypes.DoubleType, false);
        return spark.createDataFrame(rows, schema);
    }

    /**
     * A DataFrame from {@code source}: {@value #DIGITS}, a table name ({@code format} "table"), or a path
     * read with {@code format} (parquet, csv, json, orc; "auto" picks by the path's extension). CSV
     * is read without a header unless the file's first line has one ({@code csvHeader}).
     */
    public static Dataset<Row> read(SparkSession spark, String source, String format, boolean csvHeader) {
        if (DIGITS.equals(source)) {
            return digits(spark);
        }
        String f = format.toLowerCase(Locale.ROOT);
        if (f.equals("auto")) {
            String s = source.toLowerCase(Locale.ROOT);
            f = s.endsWith(".csv") || s.endsWith(".csv.gz") ? "csv" : s.endsWith(".json") ? "json"
                    : s.endsWith(".orc") ? "orc" : "parquet";
        }
        switch (f) {
            case "table":
                return spark.table(source);
            case "csv":
                return spark.read().option("header", csvHeader).option("inferSchema", true).csv(source);
            case "parquet": case "json": case "orc":
                return spark.read().format(f).load(source);
            default:
                throw new IllegalArgumentException("unknown format '" + format + "': use auto, parquet, csv, json, orc or table");
        }
    }

    /**
     * Examples with dense ids 0 .. n-1 in the DataFrame's order. {@code featuresColumn} and
     * {@code labelColumn} may be null (see the class comment).
     */
    public static JavaRDD<Example> examples(Dataset<Row> frame, String featuresColumn, String labelColumn) {
        StructType schema = frame.schema();
        Columns columns = Columns.of(schema, featuresColumn, labelColumn);
        int labelIndex = columns.label;
        FeatureReader reader = columns.features >= 0
                ? FeatureReader.column(columns.features, schema.fields()[columns.features])
                : FeatureReader.numericColumns(columns.numeric);
        FeatureReader r = reader;
        return frame.javaRDD().zipWithIndex().map(t -> {
            Row row = t._1();
            if (row.isNullAt(labelIndex)) {
                throw new IllegalArgumentException("row " + t._2() + " has no label: drop or fill nulls before training");
            }
            return new Example(t._2(), r.read(row, t._2()), ((Number) row.get(labelIndex)).floatValue());
        });
    }

    /**
     * Which columns hold the label and the features: {@code features} the index of one array or ML
     * vector column, else -1 and {@code numeric} every numeric column but the label (see the class comment).
     */
    static final class Columns {
        final int label;
        final int features;
        final int[] numeric;

        private Columns(int label, int features, int[] numeric) {
            this.label = label;
            this.features = features;
            this.numeric = numeric;
        }

        static Columns of(StructType schema, String featuresColumn, String labelColumn) {
            String label = labelColumn != null ? labelColumn
                    : Arrays.asList(schema.fieldNames()).contains("label") ? "label" : schema.fieldNames()[schema.size() - 1];
            int labelIndex = fieldIndex(schema, label, "label");
            if (!(schema.fields()[labelIndex].dataType() instanceof NumericType)) {
                throw new IllegalArgumentException("label column '" + label + "' is " + schema.fields()[labelIndex].dataType()
                        + "; it must be numeric class indices");
            }
            String features = featuresColumn != null ? featuresColumn
                    : Arrays.asList(schema.fieldNames()).contains("features") ? "features" : null;
            if (features != null) {
                return new Columns(labelIndex, fieldIndex(schema, features, "features"), null);
            }
            List<Integer> numeric = new ArrayList<>();
            for (int i = 0; i < schema.size(); i++) {
                if (i != labelIndex && schema.fields()[i].dataType() instanceof NumericType) {
                    numeric.add(i);
                }
            }
            if (numeric.isEmpty()) {
                throw new IllegalArgumentException("no numeric feature columns besides the label '" + label
                        + "' in " + schema.simpleString() + "; name one with --features-col");
            }
            return new Columns(labelIndex, -1, numeric.stream().mapToInt(Integer::intValue).toArray());
        }

        /**
         * Whether the named features column holds ML vectors (true) or arrays of numbers (false); any other
         * type fails, naming the column. The one check both readers (this class's and RowBlockReader) make.
         */
        static boolean isMlVector(StructField field) {
            DataType type = field.dataType();
            if (type instanceof StructType || "vector".equals(type.typeName())) {
                return true;
            }
            if (type instanceof ArrayType && ((ArrayType) type).elementType() instanceof NumericType) {
                return false;
            }
            throw new IllegalArgumentException("features column '" + field.name() + "' is " + type.simpleString()
                    + "; use an array of numbers, an ML vector, or leave --features-col out to use every numeric column");
        }
    }

    private static int fieldIndex(StructType schema, String name, String what) {
        for (int i = 0; i < schema.size(); i++) {
            if (schema.fields()[i].name().equals(name)) {
                return i;
            }
        }
        throw new IllegalArgumentException("no " + what + " column '" + name + "' in " + schema.simpleString());
    }

    /** A rank's examples as one batch, in id order, features scaled as {@code stats} says. */
    public static FeatureBatch batch(Iterator<Example> examples, DataStats stats) {
        List<Example> mine = new ArrayList<>();
        examples.forEachRemaining(mine::add);
        mine.sort(Comparator.comparingLong(Example::id));
        int cols = stats.cols();
        float[] x = new float[mine.size() * cols];
        float[] y = new float[mine.size()];
        for (int r = 0; r < mine.size(); r++) {
            System.arraycopy(mine.get(r).features, 0, x, r * cols, cols);
            y[r] = mine.get(r).label;
        }
        return RowBlock.batch(List.of(RowBlock.ofPartition(0, mine.size(), cols, x, y)), stats);
    }

    /** Sends key {@code k} (a rank, or a global id) to partition {@code k mod ranks}. */
    static final class IdModulo extends Partitioner {
        private static final long serialVersionUID = 1L;
        private final int ranks;

        IdModulo(int ranks) {
            this.ranks = ranks;
        }

        @Override
        public int numPartitions() {
            return ranks;
        }

        @Override
        public int getPartition(Object key) {
            return (int) Math.floorMod((Long) key, (long) ranks);
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof IdModulo && ((IdModulo) o).ranks == ranks;
        }

        @Override
        public int hashCode() {
            return ranks;
        }
    }

    /** Reads one row's features, whatever form the DataFrame keeps them in. */
    private interface FeatureReader extends java.io.Serializable {
        float[] read(Row row, long id);

        static FeatureReader column(int index, StructField field) {
            if (!Columns.isMlVector(field)) {
                return (row, id) -> {
                    if (row.isNullAt(index)) {
                        throw new IllegalArgumentException("row " + id + " has no features: drop or fill nulls before training");
                    }
                    List<Object> values = row.getList(index);
                    float[] x = new float[values.size()];
                    for (int i = 0; i < x.length; i++) {
                        x[i] = ((Number) values.get(i)).floatValue();
                    }
                    return x;
                };
            }
            return (row, id) -> {
                Object v = row.get(index);
                if (v == null) {
                    throw new IllegalArgumentException("row " + id + " has no features: drop or fill nulls before training");
                }
                return v instanceof Row ? vector((Row) v, id) : mlVector(v);
            };
        }

        static FeatureReader numericColumns(int[] indices) {
            return (row, id) -> {
                float[] x = new float[indices.length];
                for (int i = 0; i < indices.length; i++) {
                    if (row.isNullAt(indices[i])) {
                        throw new IllegalArgumentException("row " + id + " has no value in column " + indices[i]
                                + ": drop or fill nulls before training");
                    }
                    x[i] = ((Number) row.get(indices[i])).floatValue();
                }
                return x;
            };
        }

        /** A Spark ML Vector object (spark-mllib on the class path), read through its toArray without linking to it. */
        private static float[] mlVector(Object v) {
            try {
                double[] d = (double[]) v.getClass().getMethod("toArray").invoke(v);
                float[] x = new float[d.length];
                for (int i = 0; i < d.length; i++) {
                    x[i] = (float) d[i];
                }
                return x;
            } catch (ReflectiveOperationException | ClassCastException e) {
                throw new IllegalArgumentException("cannot read features of type " + v.getClass().getName(), e);
            }
        }

        /** Spark ML's vector in its stored form: type 1 dense (values), 0 sparse (size, indices, values). */
        private static float[] vector(Row v, long id) {
            byte kind = ((Number) v.get(0)).byteValue();
            List<Object> values = v.getList(3);
            if (kind == 1) {
                float[] x = new float[values.size()];
                for (int i = 0; i < x.length; i++) {
                    x[i] = ((Number) values.get(i)).floatValue();
                }
                return x;
            }
            float[] x = new float[((Number) v.get(1)).intValue()];
            List<Object> indices = v.getList(2);
            for (int i = 0; i < indices.size(); i++) {
                x[((Number) indices.get(i)).intValue()] = ((Number) values.get(i)).floatValue();
            }
            return x;
        }
    }
}
