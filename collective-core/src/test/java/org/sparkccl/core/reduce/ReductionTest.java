package org.sparkccl.core.reduce;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Random;
import org.agrona.UnsafeApi;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.sparkccl.core.DataType;
import org.sparkccl.core.jdk.JdkAccess;
import org.sparkccl.core.ReduceOp;

class ReductionTest {
    private static final int COUNT = 1001;

    @BeforeAll
    static void access() {
        JdkAccess.ensureAgronaAccess();
    }

    @ParameterizedTest
    @EnumSource(DataType.class)
    void everyOpMatchesAScalarReferenceAndAverageDividesOnce(DataType type) {
        Random random = new Random(type.ordinal());
        long a = UnsafeApi.allocateMemory(COUNT * 8L);
        long b = UnsafeApi.allocateMemory(COUNT * 8L);
        long out = UnsafeApi.allocateMemory(COUNT * 8L);
        try {
            for (ReduceOp op : ReduceOp.values()) {
                double[] x = fill(type, a, random, op);
                double[] y = fill(type, b, random, op);
                Reduction.reduce(type, op, a, b, out, COUNT);
                if (op == ReduceOp.AVG) {
                    Reduction.divide(type, out, COUNT, 3);
                }
                for (int i = 0; i < COUNT; i++) {
                    if (type.isFloatingPoint()) {
                        double want = expected(op, x[i], y[i]);
                        assertEquals(want, read(type, out, i), tolerance(type, want), type + " " + op + " element " + i);
                    } else {
                        long want = expectedInteger(type, op, readLong(type, a, i), readLong(type, b, i));
                        assertEquals(want, readLong(type, out, i), type + " " + op + " element " + i);
                    }
                }
            }
        } finally {
            UnsafeApi.freeMemory(a);
            UnsafeApi.freeMemory(b);
            UnsafeApi.freeMemory(out);
        }
    }

    /** Blocks of heap arrays (long float and double runs) give the scalar loop's bits, in place too, across block ends. */
    @ParameterizedTest
    @EnumSource(value = DataType.class, names = {"FLOAT32", "FLOAT64"})
    void heapBlocksGiveTheScalarBitsAcrossBlockEnds(DataType type) {
        int count = 2 * HeapBlocks.BLOCK_BYTES / type.size() + 13;
        Random random = new Random(99);
        long a = UnsafeApi.allocateMemory(count * 8L);
        long b = UnsafeApi.allocateMemory(count * 8L);
        long out = UnsafeApi.allocateMemory(count * 8L);
        try {
            for (ReduceOp op : ReduceOp.values()) {
                for (long n : new long[] {Reduction.HEAP_BLOCK_MIN_ELEMENTS - 1, Reduction.HEAP_BLOCK_MIN_ELEMENTS, count}) {
                    for (int i = 0; i < n; i++) {
                        double x = i % 97 == 0 ? -0.0 : random.nextGaussian() * 1e3;
                        double y = i % 89 == 0 ? 0.0 : i % 191 == 0 ? Double.NaN : random.nextGaussian() * 1e-3;
                        if (type == DataType.FLOAT32) {
                            UnsafeApi.putFloat(a + 4L * i, (float) x);
                            UnsafeApi.putFloat(b + 4L * i, (float) y);
                        } else {
                            UnsafeApi.putDouble(a + 8L * i, x);
                            UnsafeApi.putDouble(b + 8L * i, y);
                        }
                    }
                    Reduction.reduce(type, op, a, b, out, n);
                    for (int i = 0; i < n; i++) {
                        long want;
                        long got;
                        if (type == DataType.FLOAT32) {
                            float x = UnsafeApi.getFloat(a + 4L * i);
                            float y = UnsafeApi.getFloat(b + 4L * i);
                            float w = op == ReduceOp.PROD ? x * y : op == ReduceOp.MIN ? Math.min(x, y)
                                    : op == ReduceOp.MAX ? Math.max(x, y) : x + y;
                            want = Float.floatToRawIntBits(w);
                            got = Float.floatToRawIntBits(UnsafeApi.getFloat(out + 4L * i));
                        } else {
                            double x = UnsafeApi.getDouble(a + 8L * i);
                            double y = UnsafeApi.getDouble(b + 8L * i);
                            double w = op == ReduceOp.PROD ? x * y : op == ReduceOp.MIN ? Math.min(x, y)
                                    : op == ReduceOp.MAX ? Math.max(x, y) : x + y;
                            want = Double.doubleToRawLongBits(w);
                            got = Double.doubleToRawLongBits(UnsafeApi.getDouble(out + 8L * i));
                        }
                        assertEquals(want, got, type + " " + op + " count " + n + " element " + i);
                    }
                    Reduction.reduce(type, op, a, b, a, n); // in place
                    for (int i = 0; i < n; i++) {
                        int es = type.size();
                        assertEquals(es == 4 ? UnsafeApi.getInt(out + 4L * i) : UnsafeApi.getLong(out + 8L * i),
                                es == 4 ? UnsafeApi.getInt(a + 4L * i) : UnsafeApi.getLong(a + 8L * i),
                                type + " " + op + " in place, element " + i);
                    }
                }
            }
        } finally {
            UnsafeApi.freeMemory(a);
            UnsafeApi.freeMemory(b);
            UnsafeApi.freeMemory(out);
        }
    }

    /**
     * reduceToAll (the shared-chunk all-reduce's step) gives every output the bits of reduce in
     * input order then divide, for every type and op, 1-4 inputs, below and above the fused
     * float/double threshold and across heap-block ends, with one output aliasing its input.
     */
    @ParameterizedTest
    @EnumSource(DataType.class)
    void reduceToAllGivesEveryOutputTheBitsOfPairwiseReduceThenDivide(DataType type) {
        int es = type.size();
        int maxCount = 2 * HeapBlocks.BLOCK_BYTES / 4 + 13;
        long bytes = (long) maxCount * es;
        Random random = new Random(7);
        int k = 4;
        long[] inputs = new long[k];
        long[] outputs = new long[k];
        long expected = UnsafeApi.allocateMemory(bytes);
        long scratch = UnsafeApi.allocateMemory(bytes);
        for (int p = 0; p < k; p++) {
            inputs[p] = UnsafeApi.allocateMemory(bytes);
            outputs[p] = UnsafeApi.allocateMemory(bytes);
        }
        try {
            for (ReduceOp op : ReduceOp.values()) {
                for (int ranks = 1; ranks <= k; ranks++) {
                    for (int count : new int[] {7, Reduction.HEAP_BLOCK_MIN_ELEMENTS, maxCount}) {
                        for (int p = 0; p < ranks; p++) {
                            for (long i = 0; i < (long) count * es; i++) {
                                UnsafeApi.putByte(inputs[p] + i, (byte) random.nextInt());
                            }
                        }
                        // The reference: pairwise in input order, then AVG's division.
                        UnsafeApi.copyMemory(inputs[0], expected, (long) count * es);
                        for (int p = 1; p < ranks; p++) {
                            Reduction.reduce(type, op, expected, inputs[p], expected, count);
                        }
                        if (op == ReduceOp.AVG) {
                            Reduction.divide(type, expected, count, ranks);
                        }
                        long[] outs = outputs.clone();
                        outs[ranks - 1] = inputs[ranks - 1]; // in place for the last input
                        Reduction.reduceToAll(type, op, inputs, ranks, outs, ranks, 0, count, scratch);
                        for (int q = 0; q < ranks; q++) {
                            for (long i = 0; i < (long) count * es; i++) {
                                assertEquals(UnsafeApi.getByte(expected + i), UnsafeApi.getByte(outs[q] + i),
                                        type + " " + op + " " + ranks + " inputs, count " + count + ", output " + q
                                                + ", byte " + i);
                            }
                        }
                    }
                }
            }
        } finally {
            UnsafeApi.freeMemory(expected);
            UnsafeApi.freeMemory(scratch);
            for (int p = 0; p < k; p++) {
                UnsafeApi.freeMemory(inputs[p]);
                UnsafeApi.freeMemory(outputs[p]);
            }
        }
    }

    private static double expected(ReduceOp op, double x, double y) {
        switch (op) {
            case PROD: return x * y;
            case MIN: return Math.min(x, y);
            case MAX: return Math.max(x, y);
            case AVG: return (x + y) / 3;
            default: return x + y;
        }
    }

    /** Exact integer reference: the op in 64 bits, wrapped to the type's width, AVG then truncating. */
    private static long expectedInteger(DataType type, ReduceOp op, long x, long y) {
        long r;
        switch (op) {
            case PROD: r = x * y; break;
            case MIN: r = Math.min(x, y); break;
            case MAX: r = Math.max(x, y); break;
            default: r = x + y; break;
        }
        long v = wrap(type, r);
        return op == ReduceOp.AVG ? v / 3 : v;
    }

    private static long readLong(DataType type, long address, int i) {
        switch (type) {
            case INT32: return UnsafeApi.getInt(address + 4L * i);
            case INT64: return UnsafeApi.getLong(address + 8L * i);
            case INT8: return UnsafeApi.getByte(address + i);
            case UINT8: return UnsafeApi.getByte(address + i) & 0xff;
            default: throw new AssertionError(type);
        }
    }

    private static long wrap(DataType type, long v) {
        switch (type) {
            case INT8: return (byte) v;
            case UINT8: return v & 0xff;
            case INT32: return (int) v;
            default: return v;
        }
    }

    private static double tolerance(DataType type, double want) {
        switch (type) {
            case FLOAT16: return Math.abs(want) * 0x1p-10 + 1e-7;
            case BFLOAT16: return Math.abs(want) * 0x1p-7 + 1e-30;
            case FLOAT32: return Math.abs(want) * 1e-6;
            case FLOAT64: return Math.abs(want) * 1e-15;
            default: return 0;
        }
    }

    private static double[] fill(DataType type, long address, Random random, ReduceOp op) {
        double[] v = new double[COUNT];
        for (int i = 0; i < COUNT; i++) {
            double d = op == ReduceOp.PROD && type.isFloatingPoint() ? 0.5 + random.nextDouble() : random.nextDouble() * 200 - 100;
            switch (type) {
                case FLOAT32: UnsafeApi.putFloat(address + 4L * i, (float) d); break;
                case FLOAT64: UnsafeApi.putDouble(address + 8L * i, d); break;
                case FLOAT16: UnsafeApi.putShort(address + 2L * i, HalfFloats.floatToHalf((float) d)); break;
                case BFLOAT16: UnsafeApi.putShort(address + 2L * i, HalfFloats.floatToBfloat16((float) d)); break;
                case INT32: UnsafeApi.putInt(address + 4L * i, random.nextInt()); break;
                case INT64: UnsafeApi.putLong(address + 8L * i, random.nextLong()); break;
                case INT8: case UINT8: UnsafeApi.putByte(address + i, (byte) random.nextInt()); break;
                default: throw new AssertionError(type);
            }
            v[i] = read(type, address, i);
        }
        return v;
    }

    private static double read(DataType type, long address, int i) {
        switch (type) {
            case FLOAT32: return UnsafeApi.getFloat(address + 4L * i);
            case FLOAT64: return UnsafeApi.getDouble(address + 8L * i);
            case FLOAT16: return HalfFloats.halfToFloat(UnsafeApi.getShort(address + 2L * i));
            case BFLOAT16: return HalfFloats.bfloat16ToFloat(UnsafeApi.getShort(address + 2L * i));
            case INT32: return UnsafeApi.getInt(address + 4L * i);
            case INT64: return UnsafeApi.getLong(address + 8L * i);
            case INT8: return UnsafeApi.getByte(address + i);
            case UINT8: return UnsafeApi.getByte(address + i) & 0xff;
            default: throw new AssertionError(type);
        }
    }
}
