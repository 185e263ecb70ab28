package org.sparkccl.arrow;

import org.sparkccl.core.memory.HostMemoryBlock;
import org.sparkccl.core.memory.HostMemorySource;
import org.sparkccl.core.memory.HostMemorySources;
import org.sparkccl.core.memory.OffHeapMemorySource;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Random;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.OutOfMemoryException;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.memory.util.Float16;
import org.apache.arrow.vector.Float2Vector;
import org.apache.arrow.vector.Float4Vector;
import org.apache.arrow.vector.SmallIntVector;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.Schema;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.sparkccl.core.DataType;
import org.sparkccl.core.reduce.HalfFloats;

class GradientBufferTest {
    // Shapes of a small MLP with deliberately odd sizes: nothing lines up on a power of two.
    static final TensorLayout MLP = TensorLayout.builder()
            .add("fc1.weight", 13, 7)
            .add("fc1.bias", 13)
            .add("fc2.weight", 3, 13)
            .add("fc2.bias", 3)
            .add("temperature")
            .build();

    private BufferAllocator allocator;
    private OffHeapMemorySource source;

    @BeforeEach
    void setUp() {
        allocator = new RootAllocator();
        source = new OffHeapMemorySource();
    }

    @AfterEach
    void noLeaks() {
        assertEquals(0, allocator.getAllocatedMemory(), "allocator has memory outstanding");
        assertEquals(0, source.outstandingBytes(), "off-heap source has memory outstanding");
        allocator.close();
    }

    @Test
    void layoutPacksTensorsEndToEnd() {
        assertEquals(5, MLP.tensorCount());
        assertEquals(0, MLP.tensor("fc1.weight").offset());
        assertEquals(91, MLP.tensor("fc1.bias").offset());
        assertEquals(104, MLP.tensor("fc2.weight").offset());
        assertEquals(143, MLP.tensor("fc2.bias").offset());
        assertEquals(146, MLP.tensor("temperature").offset());
        assertEquals(0, MLP.tensor("temperature").rank());
        assertEquals(147, MLP.elementCount());
        assertThrows(IllegalArgumentException.class, () -> TensorLayout.builder().add("a", 2).add("a", 3).build());
        assertThrows(IllegalArgumentException.class, () -> TensorLayout.builder().add("a", 0).build());
        assertThrows(IllegalArgumentException.class, () -> MLP.tensor("fc3.weight"));
    }

    @ParameterizedTest
    @EnumSource(ElementType.class)
    void schemaRecordsLayoutAndType(ElementType type) throws Exception {
        try (GradientBuffer g = GradientBuffer.allocate(allocator, "weights", MLP, type, source)) {
            Schema schema = g.schema();
            Field f = schema.findField("weights");
            assertEquals(type.arrowType(), f.getType());
            assertEquals(MLP, TensorLayout.fromMetadata(f.getMetadata()));
            assertEquals(type, GradientBuffer.elementTypeOf(f));
            // Through Arrow's own JSON form of the schema, as another tool would see it.
            Schema back = Schema.fromJSON(schema.toJson());
            assertEquals(MLP, TensorLayout.fromMetadata(back.findField("weights").getMetadata()));
            assertEquals(type, GradientBuffer.elementTypeOf(back.findField("weights")));
        }
    }

    @Test
    void bfloat16IsInt16WithMetadata() {
        try (GradientBuffer g = GradientBuffer.allocate(allocator, "w", MLP, ElementType.BFLOAT16, source)) {
            assertTrue(g.vector() instanceof SmallIntVector);
            assertEquals("bfloat16", g.field().getMetadata().get(GradientBuffer.KEY_ELEMENT_TYPE));
            assertEquals(DataType.BFLOAT16, g.dataType());
            g.setFloat(5, 1.5f);
            assertEquals(HalfFloats.floatToBfloat16(1.5f), ((SmallIntVector) g.vector()).get(5));
        }
    }

    /** float16 elements read and round as Arrow's own Float16 does (pyarrow and Spark see the same numbers). */
    @Test
    void float16ReadsAsArrowReadsIt() {
        try (GradientBuffer g = GradientBuffer.allocate(allocator, "w", TensorLayout.flat("all", 0x10000),
                ElementType.FLOAT16, source)) {
            Float2Vector arrow = (Float2Vector) g.vector();
            for (int h = 0; h < 0x10000; h++) {
                g.dataBuffer().setShort(2L * h, (short) h);
            }
            for (int h = 0; h < 0x10000; h++) {
                float ours = g.getFloat(h);
                float theirs = arrow.getValueAsFloat(h);
                if (Float.isNaN(theirs)) {
                    assertTrue(Float.isNaN(ours), "half bits " + Integer.toHexString(h));
                } else {
                    assertEquals(Float.floatToIntBits(theirs), Float.floatToIntBits(ours), "half bits " + Integer.toHexString(h));
                }
            }
            Random rnd = new Random(13);
            for (int i = 0; i < 100_000; i++) {
                float f = Float.intBitsToFloat(rnd.nextInt());
                g.setFloat(0, f);
                assertEquals(Float16.toFloat16(f), g.dataBuffer().getShort(0), "float bits " + Float.floatToRawIntBits(f));
            }
        }
    }

    @Test
    void memoryIsForeignAccountedAndAligned() {
        GradientBuffer g = GradientBuffer.allocate(allocator, "w", MLP, ElementType.FLOAT32, source);
        assertSame(source, g.memorySource());
        assertEquals(147 * 4, g.byteLength());
        assertEquals(147 * 4, source.outstandingBytes(), "data must come from the host memory source");
        assertTrue(allocator.getAllocatedMemory() >= g.byteLength(), "the allocator must count the foreign memory");
        assertEquals(0, g.address() % 64);
        assertEquals(g.address(), g.vector().getDataBuffer().memoryAddress());
        assertEquals(147, g.vector().getValueCount());
        assertEquals(0, g.vector().getNullCount());
        for (int i = 0; i < g.elementCount(); i++) {
            assertEquals(0f, g.getFloat(i), "new buffers are zero");
        }
        g.close();
        g.close(); // idempotent
        assertEquals(0, source.outstandingBytes());
        assertEquals(0, allocator.getAllocatedMemory());
        assertThrows(IllegalStateException.class, g::address);
    }

    @Test
    void allocatorLimitGivesTheBlockBack() {
        try (BufferAllocator small = allocator.newChildAllocator("small", 0, 256)) {
            assertThrows(OutOfMemoryException.class,
                    () -> GradientBuffer.allocate(small, "w", MLP, ElementType.FLOAT32, source));
            assertEquals(0, source.outstandingBytes());
        }
    }

    @Test
    void closingTheAllocatorWithABufferOpenIsALeak() {
        BufferAllocator other = new RootAllocator();
        GradientBuffer g = GradientBuffer.allocate(other, "w", MLP, ElementType.FLOAT32, source);
        IllegalStateException e = assertThrows(IllegalStateException.class, other::close);
        assertTrue(e.getMessage().contains("Memory was leaked"), e.getMessage());
        // Too late for the allocator, but the host memory itself still goes back to its source.
        assertThrows(IllegalStateException.class, g::close);
        assertEquals(0, source.outstandingBytes());
    }

    @ParameterizedTest
    @EnumSource(ElementType.class)
    void elementsRoundTripWithinTheTypesPrecision(ElementType type) {
        Random rnd = new Random(42 + type.ordinal());
        double[] ref = new double[(int) MLP.elementCount()];
        for (int i = 0; i < ref.length; i++) {
            ref[i] = rnd.nextGaussian() * 3;
        }
        double tol = tolerance(type);
        try (GradientBuffer g = GradientBuffer.allocate(allocator, "w", MLP, type, source)) {
            g.copyFrom(ref);
            double[] back = g.toDoubleArray();
            float[] backF = g.toFloatArray();
            for (int i = 0; i < ref.length; i++) {
                assertEquals(ref[i], back[i], tol * Math.abs(ref[i]), "element " + i);
                assertEquals(back[i], backF[i], 1e-6 * Math.abs(back[i]) + 1e-30);
                assertEquals(back[i], g.getDouble(i));
            }
            // Tensor views address the same memory at their offsets.
            TensorView w2 = g.tensor("fc2.weight");
            assertEquals(g.address() + 104L * type.byteWidth(), w2.address());
            assertEquals(back[104 + 2 * 13 + 5], w2.getFloat(2, 5), 1e-6 * Math.abs(back[104 + 31]));
            float[] bias = new float[3];
            g.tensor("fc2.bias").copyTo(bias);
            for (int i = 0; i < 3; i++) {
                assertEquals(backF[143 + i], bias[i]);
            }
            g.tensor("fc1.bias").fill(0.25);
            assertEquals(0.25, g.getDouble(91));
            assertEquals(0.25, g.getDouble(103));
            assertEquals(back[90], g.getDouble(90));
            assertEquals(back[104], g.getDouble(104));
            assertThrows(IndexOutOfBoundsException.class, () -> g.getFloat(147));
            assertThrows(IndexOutOfBoundsException.class, () -> w2.getFloat(3, 0));
        }
    }

    @ParameterizedTest
    @EnumSource(ElementType.class)
    void fillAndCopyFromConvertBetweenTypes(ElementType type) {
        int n = (int) MLP.elementCount();
        try (GradientBuffer x = GradientBuffer.allocate(allocator, "x", MLP, type, source);
             GradientBuffer y = x.allocateLike("y", ElementType.FLOAT32)) {
            x.fill(-1.25);
            for (int i = 0; i < n; i++) {
                assertEquals(-1.25, x.getDouble(i));
            }
            y.copyFrom(x); // converts between types
            assertArrayEquals(x.toFloatArray(), y.toFloatArray());
        }
    }

    @Test
    void layoutMismatchIsRefused() {
        TensorLayout other = TensorLayout.flat("all", MLP.elementCount());
        try (GradientBuffer x = GradientBuffer.allocate(allocator, "x", MLP, ElementType.FLOAT32, source);
             GradientBuffer y = GradientBuffer.allocate(allocator, "y", other, ElementType.FLOAT32, source)) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> x.copyFrom(y));
            assertTrue(e.getMessage().contains("another layout"), e.getMessage());
            assertThrows(IllegalArgumentException.class, () -> x.copyFrom(new float[3]));
        }
    }

    @Test
    void float32VectorSeesWhatTheBufferWrote() {
        try (GradientBuffer g = GradientBuffer.allocate(allocator, "w", MLP, ElementType.FLOAT32, source)) {
            float[] v = new float[(int) g.elementCount()];
            Random rnd = new Random(3);
            for (int i = 0; i < v.length; i++) {
                v[i] = rnd.nextFloat() - 0.5f;
            }
            g.copyFrom(v);
            Float4Vector vec = (Float4Vector) g.vector();
            for (int i = 0; i < v.length; i++) {
                assertEquals(v[i], vec.get(i));
            }
        }
    }

    @Test
    void preferredSourceIsTheAvailableOneOfHighestPriority() {
        HostMemorySource unavailable = new PrioritySource(10, "no device here");
        HostMemorySource better = new PrioritySource(5, null);
        assertSame(better, HostMemorySources.choose(List.of(unavailable, better)));
        assertSame(HostMemorySources.offHeap(), HostMemorySources.choose(List.of(unavailable)));
        assertTrue(HostMemorySources.preferred().unavailableReason() == null);
    }

    /** A real source (off-heap underneath) that reports a priority and, if given, why it cannot be used. */
    private static final class PrioritySource implements HostMemorySource {
        final int priority;
        final String why;
        final OffHeapMemorySource delegate = new OffHeapMemorySource();

        PrioritySource(int priority, String why) {
            this.priority = priority;
            this.why = why;
        }

        @Override
        public String name() {
            return "priority-" + priority;
        }

        @Override
        public String unavailableReason() {
            return why;
        }

        @Override
        public HostMemoryBlock allocate(long bytes) {
            return delegate.allocate(bytes);
        }

        @Override
        public long outstandingBytes() {
            return delegate.outstandingBytes();
        }

        @Override
        public int priority() {
            return priority;
        }
    }

    static double tolerance(ElementType type) {
        switch (type) {
            case FLOAT64: return 1e-15;
            case FLOAT32: return 6e-8;
            case FLOAT16: return 4.9e-4;  // 2^-11
            case BFLOAT16: return 3.9e-3; // 2^-8
            default: throw new AssertionError(type);
        }
    }
}
