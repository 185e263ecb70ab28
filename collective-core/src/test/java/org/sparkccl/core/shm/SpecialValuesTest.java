package org.sparkccl.core.shm;

import org.sparkccl.core.DataType;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.SharedBuffer;
import org.sparkccl.core.memory.HostStagingBuffer;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import org.agrona.UnsafeApi;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.sparkccl.core.check.ReferenceCheck;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.reduce.HalfFloats;

/**
 * NaN and infinities in all-reduce inputs come out as IEEE 754 says (NaN in, NaN out; +Inf + -Inf
 * and Inf * 0 are NaN; min and max propagate NaN, as IEEE 754-2019's minimum and maximum do), in
 * every floating type and op, on every algorithm (ring LL and Simple, one-shot, direct), among random
 * finite values that must still match the float64 reference.
 */
class SpecialValuesTest {
    private static final int RANKS = 3;
    /** Over HEAP_BLOCK_MIN_ELEMENTS (the blocked reduction) and split into several chunks. */
    private static final int COUNT = 601;
    /** Every STRIDE-th element holds special values, in one of CASES patterns. */
    private static final int STRIDE = 50;
    private static final int CASES = 6;

    @ParameterizedTest(name = "algo {0}, proto {1}")
    @CsvSource({"Ring, LL", "Ring, Simple", "OneShot, LL", "Direct, auto"})
    void specialValuesPropagateAsIeee754Says(String algo, String proto) throws Exception {
        Params params = Params.defaults().withOverrides(Map.of("SPARKCCL_ALGO", algo, "SPARKCCL_PROTO", proto));
        List<String> wrong = Collections.synchronizedList(new ArrayList<>());
        ThreadRanks.run(RANKS, params, comm -> {
            // Direct reads the peers' buffers in place: it needs buffers from allocateShared.
            try (SharedBuffer shared = algo.equals("Direct") ? comm.allocateShared(8L * COUNT) : null;
                 HostStagingBuffer staging = new HostStagingBuffer(8L * COUNT)) {
                long base = shared != null ? shared.address() : staging.address();
                for (DataType type : new DataType[] {DataType.FLOAT32, DataType.FLOAT64, DataType.FLOAT16,
                        DataType.BFLOAT16}) {
                    for (ReduceOp op : ReduceOp.values()) {
                        ReferenceCheck inputs = new ReferenceCheck(type, op, RANKS, 7);
                        double[][] all = new double[RANKS][COUNT];
                        for (int r = 0; r < RANKS; r++) {
                            inputs.fillInput(r, base, 0, COUNT);
                            for (int i = 0; i < COUNT; i++) {
                                all[r][i] = special(i, r, get(type, base, i));
                            }
                        }
                        for (int i = 0; i < COUNT; i++) {
                            put(type, base, i, all[comm.rank()][i]);
                        }
                        comm.allReduce(base, base, COUNT, type, op);
                        for (int i = 0; i < COUNT; i++) {
                            double want = fold(op, all, i);
                            double got = get(type, base, i);
                            if (!matches(got, want, op, all, i)) {
                                wrong.add("rank " + comm.rank() + " " + type + " " + op + " element " + i + ": inputs "
                                        + inputsOf(all, i) + " gave " + got + ", want " + want);
                            }
                        }
                    }
                }
            }
        });
        assertEquals(List.of(), wrong.subList(0, Math.min(10, wrong.size())), wrong.size() + " wrong");
    }

    /** Rank r's value of element i: its random finite input, or a special value of the element's case. */
    private static double special(int i, int r, double random) {
        if (i % STRIDE != 0) {
            return random;
        }
        switch (i / STRIDE % CASES) {
            case 0: return r == i / STRIDE % RANKS ? Double.NaN : random;            // NaN anywhere
            case 1: return r == 0 ? Double.POSITIVE_INFINITY : random;               // +Inf with finite
            case 2: return r == 0 ? Double.POSITIVE_INFINITY
                    : r == RANKS - 1 ? Double.NEGATIVE_INFINITY : random;            // +Inf and -Inf
            case 3: return r == RANKS - 1 ? Double.NEGATIVE_INFINITY : random;       // -Inf last
            case 4: return r == 0 ? Double.POSITIVE_INFINITY : r == 1 ? 0.0 : random; // Inf and 0
            default: return r == 1 ? Double.NaN : r == 0 ? Double.POSITIVE_INFINITY : random; // NaN and Inf
        }
    }

    /** The float64 reference, folded in rank order. */
    private static double fold(ReduceOp op, double[][] all, int i) {
        double acc = all[0][i];
        for (int r = 1; r < RANKS; r++) {
            double v = all[r][i];
            switch (op) {
                case SUM: case AVG: acc += v; break;
                case PROD: acc *= v; break;
                case MIN: acc = Math.min(acc, v); break;
                default: acc = Math.max(acc, v); break;
            }
        }
        return op == ReduceOp.AVG ? acc / RANKS : acc;
    }

    /** NaN and infinities exactly; finite results within a loose bound (ReferenceCheck tests the tight one). */
    private static boolean matches(double got, double want, ReduceOp op, double[][] all, int i) {
        if (Double.isNaN(want) || Double.isInfinite(want)) {
            return Double.isNaN(want) ? Double.isNaN(got) : got == want;
        }
        double scale = 0;
        for (int r = 0; r < RANKS; r++) {
            scale += Math.abs(all[r][i]);
        }
        return Math.abs(got - want) <= 0.02 * Math.max(scale, Math.abs(want)) + 1e-3;
    }

    private static String inputsOf(double[][] all, int i) {
        StringBuilder b = new StringBuilder("[");
        for (int r = 0; r < RANKS; r++) {
            b.append(r == 0 ? "" : ", ").append(all[r][i]);
        }
        return b.append(']').toString();
    }

    private static double get(DataType type, long base, int i) {
        switch (type) {
            case FLOAT32: return UnsafeApi.getFloat(base + 4L * i);
            case FLOAT64: return UnsafeApi.getDouble(base + 8L * i);
            case FLOAT16: return HalfFloats.halfToFloat(UnsafeApi.getShort(base + 2L * i));
            default: return HalfFloats.bfloat16ToFloat(UnsafeApi.getShort(base + 2L * i));
        }
    }

    private static void put(DataType type, long base, int i, double v) {
        switch (type) {
            case FLOAT32: UnsafeApi.putFloat(base + 4L * i, (float) v); break;
            case FLOAT64: UnsafeApi.putDouble(base + 8L * i, v); break;
            case FLOAT16: UnsafeApi.putShort(base + 2L * i, HalfFloats.floatToHalf((float) v)); break;
            default: UnsafeApi.putShort(base + 2L * i, HalfFloats.floatToBfloat16((float) v)); break;
        }
    }
}
