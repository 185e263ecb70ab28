package org.sparkccl.core.check;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashSet;
import java.util.Set;
import java.util.stream.Stream;
import org.agrona.UnsafeApi;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.sparkccl.core.DataType;
import org.sparkccl.core.jdk.JdkAccess;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.reduce.HalfFloats;
import org.sparkccl.core.reduce.Reduction;

class ReferenceCheckTest {
    private static final int COUNT = 4099;
    private long[] inputs;
    private long result;

    static Stream<Arguments> cases() {
        Stream.Builder<Arguments> b = Stream.builder();
        for (DataType t : DataType.values()) {
            for (ReduceOp op : ReduceOp.values()) {
                for (int n : new int[] {1, 3, 8}) {
                    b.add(Arguments.of(t, op, n));
                }
            }
        }
        return b.build();
    }

    @BeforeEach
    void allocate() {
        JdkAccess.ensureAgronaAccess();
        inputs = new long[8];
        for (int r = 0; r < 8; r++) {
            inputs[r] = UnsafeApi.allocateMemory(COUNT * 8L);
        }
        result = UnsafeApi.allocateMemory(COUNT * 8L);
    }

    @AfterEach
    void free() {
        for (long a : inputs) {
            UnsafeApi.freeMemory(a);
        }
        UnsafeApi.freeMemory(result);
    }

    /**
     * A result reduced as a ring does (each chunk starts at a different rank, rounding in the type at
     * every step, AVG divided at the end) passes; the same result with one element off by a little
     * fails exactly there.
     */
    @ParameterizedTest(name = "{0} {1} n={2}")
    @MethodSource("cases")
    void ringOrderedReductionPassesAndOneBadElementIsCounted(DataType type, ReduceOp op, int n) {
        ReferenceCheck check = new ReferenceCheck(type, op, n, ReferenceCheck.seed(7, type, op, n));
        int es = type.size();
        for (int r = 0; r < n; r++) {
            check.fillInput(r, inputs[r], 0, COUNT);
        }
        // Chunks of 100 elements, chunk k starting its ring at rank k mod n.
        for (int begin = 0; begin < COUNT; begin += 100) {
            int len = Math.min(100, COUNT - begin);
            int start = (begin / 100) % n;
            long off = (long) begin * es;
            UnsafeApi.copyMemory(inputs[start] + off, result + off, (long) len * es);
            for (int step = 1; step < n; step++) {
                int r = (start + step) % n;
                Reduction.reduce(type, op, result + off, inputs[r] + off, result + off, len);
            }
            if (op == ReduceOp.AVG) {
                Reduction.divide(type, result + off, len, n);
            }
        }
        ReferenceCheck.Result ok = check.checkReduced(result, 0, COUNT);
        assertEquals(0, ok.wrong(), ok.toString());
        assertNull(ok.firstWrong());

        int bad = 1234;
        perturb(type, result + (long) bad * es);
        ReferenceCheck.Result one = check.checkReduced(result, 0, COUNT);
        assertEquals(1, one.wrong(), one.toString());
        assertTrue(one.firstWrong().contains("element " + bad), one.firstWrong());
    }

    @Test
    void inputsDependOnSeedRankAndIndexAndAreRepeatable() {
        ReferenceCheck a = new ReferenceCheck(DataType.FLOAT32, ReduceOp.SUM, 4, 1);
        ReferenceCheck b = new ReferenceCheck(DataType.FLOAT32, ReduceOp.SUM, 4, 2);
        Set<Long> seen = new HashSet<>();
        for (int r = 0; r < 4; r++) {
            for (long i = 0; i < 100; i++) {
                assertEquals(a.inputBits(r, i), new ReferenceCheck(DataType.FLOAT32, ReduceOp.SUM, 4, 1).inputBits(r, i));
                seen.add(a.inputBits(r, i));
                assertNotEquals(a.inputBits(r, i), b.inputBits(r, i));
                float v = Float.intBitsToFloat((int) a.inputBits(r, i));
                assertTrue(v >= -1 && v < 1 && v != 0, "value " + v);
            }
        }
        assertEquals(400, seen.size(), "inputs repeat: the check would be weak");
        assertNotEquals(ReferenceCheck.seed(1, "float", 1024), ReferenceCheck.seed(1, "float", 2048));
    }

    @Test
    void productInputsStayNearOneAndIntegerProductsOdd() {
        ReferenceCheck f = new ReferenceCheck(DataType.FLOAT64, ReduceOp.PROD, 8, 3);
        ReferenceCheck i = new ReferenceCheck(DataType.UINT8, ReduceOp.PROD, 8, 3);
        for (long k = 0; k < 1000; k++) {
            double v = Double.longBitsToDouble(f.inputBits(5, k));
            assertTrue(v >= 0.5 && v < 1.5, "value " + v);
            assertEquals(1, i.inputBits(5, k) & 1);
        }
    }

    @Test
    void copiesAreComparedBitForBit() {
        ReferenceCheck check = new ReferenceCheck(DataType.BFLOAT16, ReduceOp.SUM, 3, 11);
        check.fillInput(2, result, 50, 200);
        assertEquals(0, check.checkCopy(2, result, 50, 200).wrong());
        // bfloat16 has few values, so another rank's data may match here and there, but not mostly.
        assertTrue(check.checkCopy(1, result, 50, 200).wrong() > 150, "another rank's data is not a copy of rank 2's");
        UnsafeApi.putShort(result + 2 * 17, (short) (UnsafeApi.getShort(result + 2 * 17) ^ 1));
        ReferenceCheck.Result r = check.checkCopy(2, result, 50, 200);
        assertEquals(1, r.wrong());
        assertTrue(r.firstWrong().contains("element 67"), r.firstWrong());
    }

    /**
     * Changes an element by 4 (or by 1 for integers): more than any tolerance here allows, which peaks
     * at bfloat16 products of 8 ranks (10 * 2^-7 * 1.5^8, about 2).
     */
    private static void perturb(DataType type, long address) {
        switch (type) {
            case FLOAT64: UnsafeApi.putDouble(address, UnsafeApi.getDouble(address) + 4); break;
            case FLOAT32: UnsafeApi.putFloat(address, UnsafeApi.getFloat(address) + 4); break;
            case FLOAT16:
                UnsafeApi.putShort(address, HalfFloats.floatToHalf(HalfFloats.halfToFloat(UnsafeApi.getShort(address)) + 4));
                break;
            case BFLOAT16:
                UnsafeApi.putShort(address,
                        HalfFloats.floatToBfloat16(HalfFloats.bfloat16ToFloat(UnsafeApi.getShort(address)) + 4));
                break;
            case INT32: UnsafeApi.putInt(address, UnsafeApi.getInt(address) + 1); break;
            case INT64: UnsafeApi.putLong(address, UnsafeApi.getLong(address) + 1); break;
            default: UnsafeApi.putByte(address, (byte) (UnsafeApi.getByte(address) + 1)); break;
        }
    }
}
