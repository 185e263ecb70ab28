package org.sparkccl.core.check;

import java.util.Locale;
import org.agrona.UnsafeApi;
import org.sparkccl.core.DataType;
import org.sparkccl.core.jdk.JdkAccess;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.reduce.HalfFloats;
import org.sparkccl.core.reduce.Reduction;

/**
 * Random inputs for a collective and the reference its result must match, as nccl-tests checks
 * (the benchmark's {@code -c 1} and the multi-process tests share it).
 *
 * <p>Rank r's element i is a pure function of (seed, r, i), so any rank can regenerate every rank's
 * inputs and compute the exact expected value of any element: in float64 for floating types, exactly
 * (with the type's wraparound) for integers. The inputs are chosen so that the check can fail:
 * <ul>
 *   <li>floats: uniform in [-1, 1), rounded to the type; for PROD in [0.5, 1.5), so that products stay
 *       near 1 instead of vanishing or overflowing;</li>
 *   <li>integers: every bit random; for PROD odd, so that products never collapse to 0 (an odd times
 *       an odd is odd, modulo any power of two).</li>
 * </ul>
 *
 * <p>Tolerance. MIN and MAX, and every integer op, must be exact. SUM, AVG and PROD of floating types
 * are rounded at every ring step in the type itself (float16 and bfloat16 included, as GPUs do), so
 * the error grows with the rank count: {@code |got - want| <= (n + 2) * eps * scale + (n + 2) * tiny},
 * with {@code eps} the type's machine epsilon, {@code scale} the sum of |inputs| (divided by n for AVG)
 * or |product|, and {@code tiny} the type's smallest subnormal (float16 inputs can be subnormal).
 *
 * <p>AVG of integers is the wrapped sum divided by n, truncated toward zero.
 */
public final class ReferenceCheck {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    private final DataType type;
    private final ReduceOp op;
    private final int ranks;
    private final long seed;
    private final double eps;
    private final double tiny;

    /** What a check found: how many elements were wrong, and the first of them in words. */
    public static final class Result {
        private final long wrong;
        private final String firstWrong;

        public Result(long wrong, String firstWrong) {
            this.wrong = wrong;
            this.firstWrong = firstWrong;
        }

        public long wrong() {
            return wrong;
        }

        /** Null when nothing was wrong. */
        public String firstWrong() {
            return firstWrong;
        }

        @Override
        public String toString() {
            return wrong == 0 ? "0 wrong" : wrong + " wrong, first: " + firstWrong;
        }
    }

    public ReferenceCheck(DataType type, ReduceOp op, int ranks, long seed) {
        if (ranks < 1) {
            throw new IllegalArgumentException("ranks must be at least 1, got " + ranks);
        }
        this.type = type;
        this.op = op;
        this.ranks = ranks;
        this.seed = seed;
        switch (type) {
            case FLOAT64: eps = 0x1p-52; tiny = Double.MIN_VALUE; break;
            case FLOAT32: eps = 0x1p-23; tiny = Float.MIN_VALUE; break;
            case FLOAT16: eps = 0x1p-10; tiny = 0x1p-24; break;
            case BFLOAT16: eps = 0x1p-7; tiny = 0x1p-133; break;
            default: eps = 0; tiny = 0; break;
        }
    }

    /** A seed that differs per (base, case, size), so that every row of a benchmark checks new data. */
    public static long seed(long base, Object... parts) {
        long h = base;
        for (Object p : parts) {
            h = mix(h ^ String.valueOf(p).hashCode());
        }
        return h;
    }

    public DataType type() {
        return type;
    }

    public ReduceOp op() {
        return op;
    }

    /** Writes rank {@code rank}'s input elements {@code [first, first + count)} to {@code address}. */
    public void fillInput(int rank, long address, long first, long count) {
        int es = type.size();
        for (long i = 0; i < count; i++) {
            putBits(address + i * es, inputBits(rank, first + i));
        }
    }

    /**
     * Writes to {@code out} the reduction of every rank's input elements {@code [0, count)} folded in
     * rank order in the element type, ((in_0 op in_1) op in_2) ..., then divided for avg: the exact
     * bits an all-reduce that reduces in rank order must produce. {@code scratch} holds {@code count}
     * elements.
     */
    public void foldInRankOrder(long out, long scratch, long count) {
        fillInput(0, out, 0, count);
        for (int r = 1; r < ranks; r++) {
            fillInput(r, scratch, 0, count);
            Reduction.reduce(type, op, out, scratch, out, count);
        }
        if (op == ReduceOp.AVG) {
            Reduction.divide(type, out, count, ranks);
        }
    }

    /** Rank {@code rank}'s input element {@code index}, as the raw bits of the element type. */
    public long inputBits(int rank, long index) {
        long h = mix(seed ^ mix(rank * 0x9E3779B97F4A7C15L + index * 0xC2B2AE3D27D4EB4FL + 0x165667B19E3779F9L));
        switch (type) {
            case FLOAT64: return Double.doubleToRawLongBits(uniform(h));
            case FLOAT32: return Float.floatToRawIntBits((float) uniform(h)) & 0xFFFFFFFFL;
            case FLOAT16: return HalfFloats.floatToHalf((float) uniform(h)) & 0xFFFFL;
            case BFLOAT16: return HalfFloats.floatToBfloat16((float) uniform(h)) & 0xFFFFL;
            default:
                long bits = op == ReduceOp.PROD ? h | 1 : h;
                return type.size() == 8 ? bits : bits & ((1L << (8 * type.size())) - 1);
        }
    }

    /**
     * Counts the elements at {@code address} that are not, within tolerance, the reduction over all
     * ranks of input elements {@code [first, first + count)} (first = r * count for rank r's block of a
     * reduce-scatter).
     */
    public Result checkReduced(long address, long first, long count) {
        int es = type.size();
        long wrong = 0;
        String firstWrong = null;
        boolean floating = type.isFloatingPoint();
        // The expected value is put in words only for the first wrong element: formatting it for
        // every element made the check allocate tens of MB per benchmark row, and the garbage
        // collections it caused stalled the next timed loop of allreduce-perf.
        for (long i = 0; i < count; i++) {
            long gotBits = getBits(address + i * es);
            if (floating) {
                double[] ref = floatReference(first + i);
                if (!(Math.abs(toDouble(gotBits) - ref[0]) <= ref[1])) { // NaN is wrong too
                    if (wrong == 0) {
                        firstWrong = describe(first + i, gotBits, ref[0] + " +- " + ref[1]);
                    }
                    wrong++;
                }
            } else {
                long ref = intReference(first + i);
                if (ref != toLong(gotBits)) {
                    if (wrong == 0) {
                        firstWrong = describe(first + i, gotBits, Long.toString(ref));
                    }
                    wrong++;
                }
            }
        }
        return new Result(wrong, firstWrong);
    }

    /** Counts the elements at {@code address} that are not bit for bit rank {@code rank}'s inputs {@code [first, first + count)}. */
    public Result checkCopy(int rank, long address, long first, long count) {
        int es = type.size();
        long wrong = 0;
        String firstWrong = null;
        for (long i = 0; i < count; i++) {
            long gotBits = getBits(address + i * es);
            long wantBits = inputBits(rank, first + i);
            if (gotBits != wantBits) {
                if (wrong == 0) {
                    firstWrong = describe(first + i, gotBits, "rank " + rank + "'s input " + render(wantBits));
                }
                wrong++;
            }
        }
        return new Result(wrong, firstWrong);
    }

    /** {expected, allowed absolute error} of element {@code index} for a floating type. */
    private double[] floatReference(long index) {
        double first = toDouble(inputBits(0, index));
        double acc = first;
        double absSum = Math.abs(first);
        for (int r = 1; r < ranks; r++) {
            double v = toDouble(inputBits(r, index));
            absSum += Math.abs(v);
            switch (op) {
                case SUM: case AVG: acc += v; break;
                case PROD: acc *= v; break;
                case MIN: acc = Math.min(acc, v); break;
                case MAX: acc = Math.max(acc, v); break;
                default: throw new IllegalArgumentException("unsupported op " + op);
            }
        }
        double scale;
        switch (op) {
            case SUM: scale = absSum; break;
            case AVG: acc /= ranks; scale = absSum / ranks; break;
            case PROD: scale = Math.abs(acc); break;
            default: return new double[] {acc, 0};
        }
        return new double[] {acc, (ranks + 2) * (eps * scale + tiny)};
    }

    private long intReference(long index) {
        long acc = toLong(inputBits(0, index));
        for (int r = 1; r < ranks; r++) {
            long v = toLong(inputBits(r, index));
            switch (op) {
                case SUM: case AVG: acc += v; break;
                case PROD: acc *= v; break;
                case MIN: acc = Math.min(acc, v); break;
                case MAX: acc = Math.max(acc, v); break;
                default: throw new IllegalArgumentException("unsupported op " + op);
            }
        }
        // Wrapping once at the end equals wrapping at every step: both are arithmetic modulo 2^bits.
        acc = toLong(acc);
        return op == ReduceOp.AVG ? toLong(acc / ranks) : acc;
    }

    /** Uniform in [-1, 1), or [0.5, 1.5) for PROD. */
    private double uniform(long h) {
        double u = (h >>> 11) * 0x1p-53;
        return op == ReduceOp.PROD ? 0.5 + u : 2 * u - 1;
    }

    /** The value of an element's raw bits, floating types. */
    private double toDouble(long bits) {
        switch (type) {
            case FLOAT64: return Double.longBitsToDouble(bits);
            case FLOAT32: return Float.intBitsToFloat((int) bits);
            case FLOAT16: return HalfFloats.halfToFloat((short) bits);
            case BFLOAT16: return HalfFloats.bfloat16ToFloat((short) bits);
            default: throw new IllegalStateException(type + " is not a floating type");
        }
    }

    /** The value of an element's raw bits (or of a long wrapped to the type's width), integer types. */
    private long toLong(long bits) {
        switch (type) {
            case INT8: return (byte) bits;
            case UINT8: return bits & 0xFF;
            case INT32: return (int) bits;
            case INT64: return bits;
            default: throw new IllegalStateException(type + " is not an integer type");
        }
    }

    private long getBits(long address) {
        switch (type.size()) {
            case 1: return UnsafeApi.getByte(address) & 0xFFL;
            case 2: return UnsafeApi.getShort(address) & 0xFFFFL;
            case 4: return UnsafeApi.getInt(address) & 0xFFFFFFFFL;
            default: return UnsafeApi.getLong(address);
        }
    }

    private void putBits(long address, long bits) {
        switch (type.size()) {
            case 1: UnsafeApi.putByte(address, (byte) bits); break;
            case 2: UnsafeApi.putShort(address, (short) bits); break;
            case 4: UnsafeApi.putInt(address, (int) bits); break;
            default: UnsafeApi.putLong(address, bits); break;
        }
    }

    private String render(long bits) {
        return type.isFloatingPoint() ? Double.toString(toDouble(bits)) : Long.toString(toLong(bits));
    }

    private String describe(long index, long gotBits, String want) {
        return String.format(Locale.ROOT, "%s %s over %d ranks, element %d: got %s (bits 0x%x), want %s",
                type.ncclName(), op.ncclName(), ranks, index, render(gotBits), gotBits, want);
    }

    /** SplitMix64's finalizer: a cheap, well-mixed 64-bit hash. */
    static long mix(long z) {
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }
}
