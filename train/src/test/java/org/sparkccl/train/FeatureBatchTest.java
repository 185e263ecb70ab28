package org.sparkccl.train;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.util.List;
import java.util.Random;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.Float4Vector;
import org.apache.arrow.vector.Float8Vector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.TinyIntVector;
import org.apache.arrow.vector.VectorLoader;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.VectorUnloader;
import org.apache.arrow.vector.complex.ListVector;
import org.apache.arrow.vector.complex.StructVector;
import org.apache.arrow.vector.ipc.ArrowStreamWriter;
import org.apache.arrow.vector.ipc.message.ArrowRecordBatch;
import org.apache.arrow.vector.types.FloatingPointPrecision;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.FieldType;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

class FeatureBatchTest {
    private BufferAllocator allocator;

    @BeforeEach
    void setUp() {
        allocator = new RootAllocator();
    }

    @AfterEach
    void noLeaks() {
        assertEquals(0, allocator.getAllocatedMemory(), "Arrow memory outstanding");
        allocator.close();
    }

    static FeatureBatch random(int rows, int cols, long seed) {
        Random rnd = new Random(seed);
        float[] f = new float[rows * cols];
        float[] l = new float[rows];
        for (int i = 0; i < f.length; i++) {
            f[i] = (float) rnd.nextGaussian();
        }
        for (int r = 0; r < rows; r++) {
            l[r] = rnd.nextInt(10);
        }
        return FeatureBatch.of(rows, cols, f, l);
    }

    @Test
    void fixedSizeListOfFloatRoundTrips() {
        FeatureBatch b = random(37, 11, 1);
        try (VectorSchemaRoot root = b.toArrow(allocator, "features", "label")) {
            FeatureBatch back = FeatureBatch.fromArrow(root, "features", "label");
            assertEquals(37, back.rows());
            assertEquals(11, back.cols());
            assertArrayEquals(b.features(), back.features());
            assertArrayEquals(b.labels(), back.labels());
            assertEquals(b.feature(36, 10), back.feature(36, 10));
        }
    }

    @Test
    void listOfDoubleWithIntegerLabels() {
        int rows = 23;
        int cols = 5;
        Random rnd = new Random(2);
        double[] ref = new double[rows * cols];
        try (ListVector features = ListVector.empty("features", allocator);
             IntVector labels = new IntVector("label", allocator)) {
            features.addOrGetVector(FieldType.nullable(new ArrowType.FloatingPoint(FloatingPointPrecision.DOUBLE)));
            Float8Vector data = (Float8Vector) features.getDataVector();
            features.allocateNew();
            labels.allocateNew(rows);
            for (int r = 0; r < rows; r++) {
                int start = features.startNewValue(r);
                for (int c = 0; c < cols; c++) {
                    ref[r * cols + c] = rnd.nextGaussian();
                    data.setSafe(start + c, ref[r * cols + c]);
                }
                features.endValue(r, cols);
                labels.set(r, r % 3);
            }
            data.setValueCount(rows * cols);
            features.setValueCount(rows);
            labels.setValueCount(rows);

            FeatureBatch b = FeatureBatch.fromVectors(features, labels);
            assertEquals(cols, b.cols());
            for (int i = 0; i < ref.length; i++) {
                assertEquals((float) ref[i], b.features()[i]);
            }
            assertEquals(2, b.classLabel(20));
            assertEquals(3, b.numClasses());
        }
    }

    @Test
    void raggedListsAndNullsAreRefusedNamingTheRow() {
        try (ListVector features = ListVector.empty("features", allocator);
             Float4Vector labels = new Float4Vector("label", allocator)) {
            features.addOrGetVector(FieldType.nullable(new ArrowType.FloatingPoint(FloatingPointPrecision.SINGLE)));
            Float4Vector data = (Float4Vector) features.getDataVector();
            features.allocateNew();
            int at = 0;
            for (int r = 0; r < 3; r++) {
                int n = r == 2 ? 3 : 4;
                features.startNewValue(r);
                for (int c = 0; c < n; c++) {
                    data.setSafe(at++, c);
                }
                features.endValue(r, n);
            }
            data.setValueCount(at);
            features.setValueCount(3);
            labels.allocateNew(3);
            labels.set(0, 1f);
            labels.set(1, 0f);
            labels.setNull(2);
            labels.setValueCount(3);

            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> FeatureBatch.fromVectors(features, labels));
            assertTrue(e.getMessage().contains("index 2"), e.getMessage());
            labels.set(2, 1f);
            e = assertThrows(IllegalArgumentException.class, () -> FeatureBatch.fromVectors(features, labels));
            assertTrue(e.getMessage().contains("row 2 has 3 values"), e.getMessage());
        }
    }

    @Test
    void sparkMlVectorsDenseAndSparse() {
        // Row 0 dense [1, 2, 3, 4]; row 1 sparse size 4 {1: 5, 3: -6}; row 2 sparse, empty.
        try (StructVector v = StructVector.empty("features", allocator);
             Float8Vector labels = new Float8Vector("label", allocator)) {
            TinyIntVector type = v.addOrGet("type", FieldType.notNullable(new ArrowType.Int(8, true)), TinyIntVector.class);
            IntVector size = v.addOrGet("size", FieldType.nullable(new ArrowType.Int(32, true)), IntVector.class);
            ListVector indices = v.addOrGet("indices", FieldType.nullable(ArrowType.List.INSTANCE), ListVector.class);
            ListVector values = v.addOrGet("values", FieldType.nullable(ArrowType.List.INSTANCE), ListVector.class);
            indices.addOrGetVector(FieldType.notNullable(new ArrowType.Int(32, true)));
            values.addOrGetVector(FieldType.notNullable(new ArrowType.FloatingPoint(FloatingPointPrecision.DOUBLE)));
            v.allocateNew();
            IntVector idx = (IntVector) indices.getDataVector();
            Float8Vector val = (Float8Vector) values.getDataVector();

            v.setIndexDefined(0);
            type.setSafe(0, 1);
            size.setNull(0);
            indices.setNull(0);
            values.startNewValue(0);
            for (int i = 0; i < 4; i++) {
                val.setSafe(i, i + 1);
            }
            values.endValue(0, 4);

            v.setIndexDefined(1);
            type.setSafe(1, 0);
            size.setSafe(1, 4);
            indices.startNewValue(1);
            idx.setSafe(0, 1);
            idx.setSafe(1, 3);
            indices.endValue(1, 2);
            values.startNewValue(1);
            val.setSafe(4, 5);
            val.setSafe(5, -6);
            values.endValue(1, 2);

            v.setIndexDefined(2);
            type.setSafe(2, 0);
            size.setSafe(2, 4);
            indices.startNewValue(2);
            indices.endValue(2, 0);
            values.startNewValue(2);
            values.endValue(2, 0);

            idx.setValueCount(2);
            val.setValueCount(6);
            v.setValueCount(3);
            labels.allocateNew(3);
            for (int r = 0; r < 3; r++) {
                labels.set(r, 0.5 * r);
            }
            labels.setValueCount(3);

            FeatureBatch b = FeatureBatch.fromVectors(v, labels);
            assertEquals(4, b.cols());
            assertArrayEquals(new float[] {1, 2, 3, 4, 0, 5, 0, -6, 0, 0, 0, 0}, b.features());
            assertArrayEquals(new float[] {0, 0.5f, 1}, b.labels());
            assertThrows(IllegalArgumentException.class, () -> b.classLabel(1), "0.5 is no class");
        }
    }

    @Test
    void oneColumnPerFeature() {
        try (Float8Vector x = new Float8Vector("x", allocator);
             IntVector y = new IntVector("y", allocator);
             Float4Vector label = new Float4Vector("label", allocator)) {
            x.allocateNew(4);
            y.allocateNew(4);
            label.allocateNew(4);
            for (int r = 0; r < 4; r++) {
                x.set(r, r * 0.25);
                y.set(r, -r);
                label.set(r, r % 2);
            }
            x.setValueCount(4);
            y.setValueCount(4);
            label.setValueCount(4);
            FeatureBatch b = FeatureBatch.fromColumns(List.of(x, y), label);
            assertArrayEquals(new float[] {0, 0, 0.25f, -1, 0.5f, -2, 0.75f, -3}, b.features());
            assertEquals(2, b.numClasses());
        }
    }

    @Test
    void arrowStreamOfSeveralBatchesConcatenates() throws IOException {
        FeatureBatch first = random(10, 3, 5);
        FeatureBatch second = random(7, 3, 6);
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (VectorSchemaRoot root = first.toArrow(allocator, "f", "y");
             VectorSchemaRoot other = second.toArrow(allocator, "f", "y");
             ArrowStreamWriter writer = new ArrowStreamWriter(root, null, bytes)) {
            writer.start();
            writer.writeBatch();
            // Load the second batch into the writer's root, as a producer of batches would.
            try (ArrowRecordBatch batch = new VectorUnloader(other).getRecordBatch()) {
                new VectorLoader(root).load(batch);
            }
            writer.writeBatch();
            writer.end();
        }
        FeatureBatch all = FeatureBatch.fromArrowStream(new ByteArrayInputStream(bytes.toByteArray()), allocator, "f", "y");
        assertEquals(17, all.rows());
        assertArrayEquals(FeatureBatch.concat(List.of(first, second)).features(), all.features());
        assertArrayEquals(second.labels(), all.slice(10, 17).labels());
        assertArrayEquals(second.features(), all.slice(10, 17).features());
    }

    @Test
    void shapesAreChecked() {
        assertThrows(IllegalArgumentException.class, () -> FeatureBatch.of(2, 3, new float[5], new float[2]));
        assertThrows(IllegalArgumentException.class,
                () -> FeatureBatch.concat(List.of(random(2, 3, 1), random(2, 4, 1))));
        assertThrows(IndexOutOfBoundsException.class, () -> random(2, 3, 1).feature(0, 3));
    }
}
