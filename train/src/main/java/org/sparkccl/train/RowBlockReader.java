package org.sparkccl.train;

import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * Reads a DataFrame's training columns into one {@link RowBlock} per partition, straight from
 * Spark's internal rows: Spark SQL first casts the features to {@code array<float>} (an ML vector
 * column stays as it is stored: type, size, indices, values) and the label to float, so that each
 * row costs a few array reads and no Row, boxed number or per-row array. The columns are those
 * {@link TrainingData#examples} reads; the errors name the row by its place in its partition.
 */
final class RowBlockReader {
    private static final int FIRST_CAPACITY = 1024;

    private RowBlockReader() {
    }

    static JavaRDD<RowBlock> blocks(Dataset<Row> frame, String featuresColumn, String labelColumn) {
        StructType schema = frame.schema();
        TrainingData.Columns columns = TrainingData.Columns.of(schema, featuresColumn, labelColumn);
        Column features;
        boolean mlVector = false;
        if (columns.features >= 0) {
            StructField field = schema.fields()[columns.features];
            mlVector = TrainingData.Columns.isMlVector(field);
            features = mlVector ? column(field.name()) : column(field.name()).cast(FLOATS);
        } else {
            Column[] each = Arrays.stream(columns.numeric).mapToObj(i -> column(schema.fields()[i].name()))
                    .toArray(Column[]::new);
            features = functions.array(each).cast(FLOATS);
        }
        Column label = column(schema.fields()[columns.label].name()).cast(DataTypes.FloatType);
        Dataset<Row> typed = frame.select(features.as("features"), label.as("label"));
        boolean vector = mlVector;
        return typed.queryExecution().toRdd().toJavaRDD()
                .mapPartitionsWithIndex((p, rows) -> List.of(read(p, rows, vector)).iterator(), false);
    }

    private static final DataType FLOATS = DataTypes.createArrayType(DataTypes.FloatType);

    private static Column column(String name) {
        return functions.col("`" + name.replace("`", "``") + "`");
    }

    /** One partition's rows: features at ordinal 0 ({@code array<float>} or an ML vector's struct), label at 1. */
    static RowBlock read(int partition, Iterator<InternalRow> rows, boolean mlVector) {
        float[] x = new float[0];
        float[] y = new float[FIRST_CAPACITY];
        int n = 0;
        int cols = -1;
        while (rows.hasNext()) {
            InternalRow row = rows.next();
            if (row.isNullAt(1)) {
                throw new IllegalArgumentException("row " + n + " of partition " + partition
                        + " has no label: drop or fill nulls before training");
            }
            if (row.isNullAt(0)) {
                throw new IllegalArgumentException("row " + n + " of partition " + partition
                        + " has no features: drop or fill nulls before training");
            }
            InternalRow vector = mlVector ? row.getStruct(0, 4) : null;
            ArrayData values = mlVector ? vector.getArray(3) : row.getArray(0);
            boolean sparse = mlVector && vector.getByte(0) == 0;
            int width = sparse ? vector.getInt(1) : values.numElements();
            if (cols < 0) {
                cols = width;
                x = new float[FIRST_CAPACITY * cols];
            } else if (width != cols) {
                throw new IllegalArgumentException("row " + n + " of partition " + partition + " has " + width
                        + " features, earlier ones " + cols + ": every row needs the same number");
            }
            if (n == y.length) {
                y = Arrays.copyOf(y, 2 * n);
                x = Arrays.copyOf(x, 2 * n * cols); // zeros beyond n rows: sparse rows write only their entries
            }
            int at = n * cols;
            if (sparse) {
                ArrayData indices = vector.getArray(2);
                for (int k = 0; k < values.numElements(); k++) {
                    int i = indices.getInt(k);
                    if (i < 0 || i >= cols) {
                        throw new IllegalArgumentException("row " + n + " of partition " + partition
                                + " is a sparse vector with index " + i + " outside its size " + cols);
                    }
                    x[at + i] = (float) values.getDouble(k);
                }
            } else if (mlVector) {
                for (int i = 0; i < cols; i++) {
                    x[at + i] = (float) values.getDouble(i);
                }
            } else {
                for (int i = 0; i < cols; i++) {
                    if (values.isNullAt(i)) {
                        throw new IllegalArgumentException("row " + n + " of partition " + partition
                                + " has a null (or non-numeric) feature at index " + i + ": drop or fill nulls before training");
                    }
                    x[at + i] = values.getFloat(i);
                }
            }
            y[n++] = row.getFloat(1);
        }
        int width = Math.max(cols, 0);
        return RowBlock.ofPartition(partition, n, width, Arrays.copyOf(x, n * width), Arrays.copyOf(y, n));
    }
}
