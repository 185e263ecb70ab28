package org.sparkccl.spark.ml;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.ml.linalg.SQLDataTypes;
import org.apache.spark.ml.linalg.Vectors;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.sparkccl.train.Example;
import org.sparkccl.train.TrainingData;

/** The bundled digits in the shapes Spark ML users have them. */
final class MlTestData {
    private MlTestData() {
    }

    /** id (long), features (an ML vector of the 64 pixels, 0..16), label (double 0..9). */
    static Dataset<Row> digitsVectors(SparkSession spark) {
        List<Row> rows = new ArrayList<>();
        for (Example e : TrainingData.digitsExamples()) {
            double[] x = new double[e.features().length];
            for (int i = 0; i < x.length; i++) {
                x[i] = e.features()[i];
            }
            rows.add(RowFactory.create(e.id(), Vectors.dense(x), (double) e.label()));
        }
        StructType schema = new StructType().add("id", DataTypes.LongType, false)
                .add("features", SQLDataTypes.VectorType(), false).add("label", DataTypes.DoubleType, false);
        return spark.createDataFrame(rows, schema);
    }

    /** id, one double column per pixel (p0 .. p63), label: what a VectorAssembler starts from. */
    static Dataset<Row> digitsColumns(SparkSession spark) {
        List<Row> rows = new ArrayList<>();
        StructType schema = new StructType().add("id", DataTypes.LongType, false);
        for (int i = 0; i < 64; i++) {
            schema = schema.add("p" + i, DataTypes.DoubleType, false);
        }
        schema = schema.add("label", DataTypes.DoubleType, false);
        for (Example e : TrainingData.digitsExamples()) {
            Object[] values = new Object[66];
            values[0] = e.id();
            for (int i = 0; i < 64; i++) {
                values[i + 1] = (double) e.features()[i];
            }
            values[65] = (double) e.label();
            rows.add(RowFactory.create(values));
        }
        return spark.createDataFrame(rows, schema);
    }

    static String[] pixelColumns() {
        String[] names = new String[64];
        for (int i = 0; i < 64; i++) {
            names[i] = "p" + i;
        }
        return names;
    }
}
