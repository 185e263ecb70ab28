package org.sparkccl.train;

import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.util.MemoryUtil;
import org.apache.arrow.vector.BaseIntVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.Float4Vector;
import org.apache.arrow.vector.FloatingPointVector;
import org.apache.arrow.vector.ValueVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.complex.FixedSizeListVector;
import org.apache.arrow.vector.complex.ListVector;
import org.apache.arrow.vector.complex.StructVector;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.arrow.vector.types.FloatingPointPrecision;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.FieldType;

/**
 * Training input: a {@code rows x cols} float32 feature matrix (row-major) and one label per row,
 * read out of Arrow vectors. On the JVM heap, because the model's forward and backward passes run
 * in Java over it; Arrow is how the rows arrive (from a Spark partition, an IPC stream, a file).
 *
 * <p>Features may come as:
 * <ul>
 *   <li>a {@link FixedSizeListVector} or {@link ListVector} of float, double or integers
 *       (Spark's {@code array<float>} / {@code array<double>}); every row must have the same length;</li>
 *   <li>a {@link StructVector} with children {@code type}, {@code size}, {@code indices}, {@code values}:
 *       Spark ML's {@code VectorUDT} as Spark writes it to Arrow (type 1 dense, 0 sparse);</li>
 *   <li>one scalar numeric vector per feature ({@link #fromColumns}).</li>
 * </ul>
 * Labels come from any floating-point or integer vector. Nulls are refused with the row named:
 * drop or fill them before training.
 */
public final class FeatureBatch {
    private final int rows;
    private final int cols;
    private final float[] features;
    private final float[] labels;

    private FeatureBatch(int rows, int cols, float[] features, float[] labels) {
        this.rows = rows;
        this.cols = cols;
        this.features = features;
        this.labels = labels;
    }

    /** Wraps the arrays without copying; {@code features} is row-major, {@code rows * cols} long. */
    public static FeatureBatch of(int rows, int cols, float[] features, float[] labels) {
        if (rows < 0 || cols < 1) {
            throw new IllegalArgumentException("a feature batch needs rows >= 0 and cols >= 1, got " + rows + " x " + cols);
        }
        if (features.length != (long) rows * cols || labels.length != rows) {
            throw new IllegalArgumentException("a " + rows + " x " + cols + " batch needs " + (long) rows * cols
                    + " features and " + rows + " labels, got " + features.length + " and " + labels.length);
        }
        return new FeatureBatch(rows, cols, features, labels);
    }

    /** The columns named {@code featuresColumn} and {@code labelColumn} of {@code root}'s current batch. */
    public static FeatureBatch fromArrow(VectorSchemaRoot root, String featuresColumn, String labelColumn) {
        return fromVectors(column(root, featuresColumn), column(root, labelColumn));
    }

    /** Every record batch of an Arrow IPC stream, one after the other. */
    public static FeatureBatch fromArrowStream(InputStream in, BufferAllocator allocator, String featuresColumn,
            String labelColumn) throws IOException {
        List<FeatureBatch> parts = new ArrayList<>();
        try (ArrowStreamReader reader = new ArrowStreamReader(in, allocator)) {
            VectorSchemaRoot root = reader.getVectorSchemaRoot();
            while (reader.loadNextBatch()) {
                parts.add(fromArrow(root, featuresColumn, labelColumn));
            }
        }
        if (parts.isEmpty()) {
            throw new IOException("the Arrow stream holds no record batch; an empty partition has no columns to size "
                    + "a feature batch by");
        }
        return concat(parts);
    }

    /** A features vector (list, fixed-size list or ML vector struct) and a label vector of the same length. */
    public static FeatureBatch fromVectors(FieldVector featureVector, FieldVector labelVector) {
        int rows = featureVector.getValueCount();
        requireRows(labelVector, rows, featureVector.getName());
        float[] labels = readScalars(labelVector, rows);
        if (featureVector instanceof FixedSizeListVector) {
            return fromFixedSizeList((FixedSizeListVector) featureVector, labels);
        }
        if (featureVector instanceof ListVector) {
            return fromList((ListVector) featureVector, labels);
        }
        if (featureVector instanceof StructVector) {
            return fromMlVector((StructVector) featureVector, labels);
        }
        if (featureVector instanceof FloatingPointVector || featureVector instanceof BaseIntVector) {
            return fromColumns(List.of(featureVector), labelVector);
        }
        throw new IllegalArgumentException("features column '" + featureVector.getName() + "' is "
                + featureVector.getField().getType() + "; use a list or fixed-size list of numbers (array<float>), "
                + "a Spark ML vector, or one numeric column per feature");
    }

    /** One scalar numeric vector per feature, all of the same length as {@code labelVector}. */
    public static FeatureBatch fromColumns(List<? extends FieldVector> featureColumns, FieldVector labelVector) {
        if (featureColumns.isEmpty()) {
            throw new IllegalArgumentException("at least one feature column is needed");
        }
        int rows = labelVector.getValueCount();
        int cols = featureColumns.size();
        float[] features = new float[matrixSize(rows, cols)];
        for (int c = 0; c < cols; c++) {
            FieldVector v = featureColumns.get(c);
            requireRows(v, rows, labelVector.getName());
            for (int r = 0; r < rows; r++) {
                features[r * cols + c] = readScalar(v, r, v.getName());
            }
        }
        return new FeatureBatch(rows, cols, features, readScalars(labelVector, rows));
    }

    /** The batches' rows one after the other; all must have the same column count. */
    public static FeatureBatch concat(List<FeatureBatch> batches) {
        if (batches.isEmpty()) {
            throw new IllegalArgumentException("nothing to concatenate");
        }
        int cols = batches.get(0).cols;
        long rows = 0;
        for (FeatureBatch b : batches) {
            if (b.cols != cols) {
                throw new IllegalArgumentException("cannot concatenate batches of " + cols + " and " + b.cols + " columns");
            }
            rows += b.rows;
        }
        int total = Math.toIntExact(rows);
        float[] features = new float[matrixSize(total, cols)];
        float[] labels = new float[total];
        int at = 0;
        for (FeatureBatch b : batches) {
            System.arraycopy(b.features, 0, features, at * cols, b.rows * cols);
            System.arraycopy(b.labels, 0, labels, at, b.rows);
            at += b.rows;
        }
        return new FeatureBatch(total, cols, features, labels);
    }

    // ---- Readers per Arrow shape. -------------------------------------------------------------

    private static FeatureBatch fromFixedSizeList(FixedSizeListVector v, float[] labels) {
        int rows = v.getValueCount();
        int cols = v.getListSize();
        requireNoNullRows(v, rows);
        float[] features = new float[matrixSize(rows, cols)];
        copyElements(v.getDataVector(), 0, features, v.getName());
        return new FeatureBatch(rows, cols, features, labels);
    }

    private static FeatureBatch fromList(ListVector v, float[] labels) {
        int rows = v.getValueCount();
        requireNoNullRows(v, rows);
        if (rows == 0) {
            throw new IllegalArgumentException("features column '" + v.getName() + "' has no rows to tell its width by");
        }
        int cols = v.getElementEndIndex(0) - v.getElementStartIndex(0);
        for (int r = 0; r < rows; r++) {
            int len = v.getElementEndIndex(r) - v.getElementStartIndex(r);
            if (len != cols) {
                throw new IllegalArgumentException("features column '" + v.getName() + "': row " + r + " has " + len
                        + " values, row 0 has " + cols + "; every row needs the same number of features");
            }
        }
        if (cols < 1) {
            throw new IllegalArgumentException("features column '" + v.getName() + "' has empty rows");
        }
        float[] features = new float[matrixSize(rows, cols)];
        // Equal lengths make the rows one contiguous run of the child vector.
        copyElements(v.getDataVector(), v.getElementStartIndex(0), features, v.getName());
        return new FeatureBatch(rows, cols, features, labels);
    }

    /** Spark ML's VectorUDT: struct<type: int8, size: int32, indices: array<int32>, values: array<double>>. */
    private static FeatureBatch fromMlVector(StructVector v, float[] labels) {
        FieldVector typeV = v.getChild("type");
        FieldVector sizeV = v.getChild("size");
        FieldVector indicesV = v.getChild("indices");
        FieldVector valuesV = v.getChild("values");
        if (!(typeV instanceof BaseIntVector) || !(valuesV instanceof ListVector)) {
            throw new IllegalArgumentException("struct column '" + v.getName() + "' is not a Spark ML vector (needs "
                    + "children type, size, indices, values); its type is " + v.getField().getType());
        }
        ListVector values = (ListVector) valuesV;
        int rows = v.getValueCount();
        requireNoNullRows(v, rows);
        int cols = -1;
        float[] features = null;
        for (int r = 0; r < rows; r++) {
            long kind = ((BaseIntVector) typeV).getValueAsLong(r);
            int width;
            if (kind == 1) {
                width = values.getElementEndIndex(r) - values.getElementStartIndex(r);
            } else if (kind == 0 && sizeV instanceof BaseIntVector && indicesV instanceof ListVector && !sizeV.isNull(r)) {
                width = Math.toIntExact(((BaseIntVector) sizeV).getValueAsLong(r));
            } else {
                throw new IllegalArgumentException("row " + r + " of ML vector column '" + v.getName()
                        + "' has vector type " + kind + " (1 dense, 0 sparse with size and indices expected)");
            }
            if (cols < 0) {
                cols = width;
                features = new float[matrixSize(rows, cols)];
            } else if (width != cols) {
                throw new IllegalArgumentException("features column '" + v.getName() + "': row " + r + " has size "
                        + width + ", row 0 has " + cols + "; every row needs the same number of features");
            }
            FieldVector data = values.getDataVector();
            int start = values.getElementStartIndex(r);
            int n = values.getElementEndIndex(r) - start;
            if (kind == 1) {
                for (int i = 0; i < n; i++) {
                    features[r * cols + i] = readScalar(data, start + i, v.getName());
                }
            } else {
                ListVector indices = (ListVector) indicesV;
                FieldVector idx = indices.getDataVector();
                int istart = indices.getElementStartIndex(r);
                if (indices.getElementEndIndex(r) - istart != n) {
                    throw new IllegalArgumentException("row " + r + " of ML vector column '" + v.getName()
                            + "' has " + (indices.getElementEndIndex(r) - istart) + " indices for " + n + " values");
                }
                for (int i = 0; i < n; i++) {
                    long col = ((BaseIntVector) idx).getValueAsLong(istart + i);
                    if (col < 0 || col >= cols) {
                        throw new IllegalArgumentException("row " + r + " of ML vector column '" + v.getName()
                                + "' has index " + col + " outside its size " + cols);
                    }
                    features[r * cols + (int) col] = readScalar(data, start + i, v.getName());
                }
            }
        }
        if (rows == 0) {
            throw new IllegalArgumentException("features column '" + v.getName() + "' has no rows to tell its width by");
        }
        return new FeatureBatch(rows, cols, features, labels);
    }

    /** {@code out.length} consecutive elements of {@code data} from {@code start}; bulk for float32 without nulls. */
    private static void copyElements(FieldVector data, int start, float[] out, String column) {
        if (data.getValueCount() < (long) start + out.length) {
            throw new IllegalArgumentException("features column '" + column + "' holds " + data.getValueCount()
                    + " values, its rows need " + ((long) start + out.length));
        }
        if (data instanceof Float4Vector && data.getNullCount() == 0) {
            long address = data.getDataBuffer().memoryAddress() + 4L * start;
            MemoryUtil.directBuffer(address, 4 * out.length).order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer().get(out);
            return;
        }
        for (int i = 0; i < out.length; i++) {
            out[i] = readScalar(data, start + i, column);
        }
    }

    private static float[] readScalars(FieldVector v, int rows) {
        float[] out = new float[rows];
        for (int r = 0; r < rows; r++) {
            out[r] = readScalar(v, r, v.getName());
        }
        return out;
    }

    private static float readScalar(ValueVector v, int i, String column) {
        if (v.isNull(i)) {
            throw new IllegalArgumentException("column '" + column + "' has a null at index " + i
                    + "; drop or fill nulls before training (Dataset.na().drop() or .fill())");
        }
        if (v instanceof FloatingPointVector) {
            return (float) ((FloatingPointVector) v).getValueAsDouble(i);
        }
        if (v instanceof BaseIntVector) {
            return ((BaseIntVector) v).getValueAsLong(i);
        }
        throw new IllegalArgumentException("column '" + column + "' holds " + v.getField().getType()
                + "; features and labels must be numbers (float, double or integers)");
    }

    private static void requireNoNullRows(FieldVector v, int rows) {
        if (v.getNullCount() == 0) {
            return;
        }
        for (int r = 0; r < rows; r++) {
            if (v.isNull(r)) {
                throw new IllegalArgumentException("features column '" + v.getName() + "' is null at row " + r
                        + "; drop or fill nulls before training (Dataset.na().drop())");
            }
        }
    }

    private static void requireRows(FieldVector v, int rows, String other) {
        if (v.getValueCount() != rows) {
            throw new IllegalArgumentException("column '" + v.getName() + "' has " + v.getValueCount()
                    + " rows, column '" + other + "' " + rows);
        }
    }

    private static FieldVector column(VectorSchemaRoot root, String name) {
        FieldVector v = root.getVector(name);
        if (v == null) {
            throw new IllegalArgumentException("no column '" + name + "'; the batch has " + root.getSchema().getFields());
        }
        return v;
    }

    private static int matrixSize(int rows, int cols) {
        long n = (long) rows * cols;
        if (n > Integer.MAX_VALUE - 8) {
            throw new IllegalArgumentException(rows + " x " + cols + " features do not fit one Java array; "
                    + "split the partition into smaller batches");
        }
        return (int) n;
    }

    // ---- Contents. ----------------------------------------------------------------------------

    public int rows() {
        return rows;
    }

    public int cols() {
        return cols;
    }

    public float feature(int row, int col) {
        Objects.checkIndex(row, rows);
        Objects.checkIndex(col, cols);
        return features[row * cols + col];
    }

    /** The row-major feature matrix itself (not a copy): {@code features()[row * cols() + col]}. */
    public float[] features() {
        return features;
    }

    /** The first {@code out.length} features of {@code row}, widened to double (exactly) for the models' math. */
    public void copyRow(int row, double[] out) {
        Objects.checkIndex(row, rows);
        Objects.checkFromIndexSize(0, out.length, cols);
        int at = row * cols;
        for (int i = 0; i < out.length; i++) {
            out[i] = features[at + i];
        }
    }

    public float label(int row) {
        return labels[row];
    }

    /** The labels themselves (not a copy). */
    public float[] labels() {
        return labels;
    }

    /** The label of {@code row} as a class index, for classification; refuses labels that are not whole numbers. */
    public int classLabel(int row) {
        float l = labels[row];
        if (l < 0 || l != Math.rint(l) || l > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("label " + l + " of row " + row + " is not a class index (0, 1, 2, ...)");
        }
        return (int) l;
    }

    /** One more than the largest class label: the class count a softmax over this batch needs at least. */
    public int numClasses() {
        int max = -1;
        for (int r = 0; r < rows; r++) {
            max = Math.max(max, classLabel(r));
        }
        return max + 1;
    }

    /** Rows {@code [from, to)} as a new batch (copied). */
    public FeatureBatch slice(int from, int to) {
        Objects.checkFromToIndex(from, to, rows);
        return new FeatureBatch(to - from, cols, Arrays.copyOfRange(features, from * cols, to * cols),
                Arrays.copyOfRange(labels, from, to));
    }

    /**
     * This batch as Arrow: features as a non-null {@code FixedSizeList<float32>[cols]} column and
     * labels as float32. The caller closes the root.
     */
    public VectorSchemaRoot toArrow(BufferAllocator allocator, String featuresColumn, String labelColumn) {
        FixedSizeListVector f = FixedSizeListVector.empty(featuresColumn, cols, allocator);
        Float4Vector l = new Float4Vector(labelColumn, allocator);
        try {
            f.addOrGetVector(FieldType.notNullable(new ArrowType.FloatingPoint(FloatingPointPrecision.SINGLE)));
            f.setInitialCapacity(rows);
            f.allocateNew();
            for (int r = 0; r < rows; r++) {
                f.setNotNull(r);
            }
            Float4Vector data = (Float4Vector) f.getDataVector();
            data.allocateNew(rows * cols);
            for (int i = 0; i < rows * cols; i++) {
                data.set(i, features[i]);
            }
            data.setValueCount(rows * cols);
            f.setValueCount(rows);
            l.allocateNew(rows);
            for (int r = 0; r < rows; r++) {
                l.set(r, labels[r]);
            }
            l.setValueCount(rows);
            return new VectorSchemaRoot(List.of(f, l));
        } catch (RuntimeException | Error e) {
            f.close();
            l.close();
            throw e;
        }
    }

    @Override
    public String toString() {
        return "FeatureBatch " + rows + " x " + cols;
    }
}
