package org.sparkccl.core.reduce;

import org.agrona.UnsafeApi;
import org.sparkccl.core.DataType;
import org.sparkccl.core.jdk.JdkAccess;
import org.sparkccl.core.ReduceOp;

/**
 * Float and double reductions through small heap arrays, one pair per thread: each block of both
 * operands is copied in (bulk copies run at cache speed), combined by a plain array loop that C2
 * turns into SIMD instructions, and copied out. Element by element the arithmetic is the scalar
 * loop's (IEEE add, multiply, Math.min and Math.max), so results are bit for bit the same.
 */
final class HeapBlocks {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    /** Bytes per block: 4 KB measured best (4, 16, 32 KB tried, 256 KB float32 sum); both blocks stay in L1. */
    static final int BLOCK_BYTES = 4 << 10;
    private static final long FLOAT_BASE = UnsafeApi.arrayBaseOffset(float[].class);
    private static final long DOUBLE_BASE = UnsafeApi.arrayBaseOffset(double[].class);
    private static final ThreadLocal<HeapBlocks> PER_THREAD = ThreadLocal.withInitial(HeapBlocks::new);

    private final float[] fa = new float[BLOCK_BYTES / 4];
    private final float[] fb = new float[BLOCK_BYTES / 4];
    private final double[] da = new double[BLOCK_BYTES / 8];
    private final double[] db = new double[BLOCK_BYTES / 8];
    /** The two inputs and the one output of a pairwise or into-scratch reduction, as the k-input methods take them. */
    private final long[] pair = new long[2];
    private final long[] single = new long[1];

    static HeapBlocks forThread() {
        return PER_THREAD.get();
    }

    /** {@code out[i] = a[i] op b[i]} for float32; {@code out} may be {@code a} or {@code b}. */
    void reduceFloat(ReduceOp op, long a, long b, long out, long count) {
        pair[0] = a;
        pair[1] = b;
        single[0] = out;
        reduceFloatToAll(op, pair, 2, 0, single, 1, 0, count, 1);
    }

    /**
     * Each of the first m outputs gets, from byte {@code outOffset} on, {@code in_0 op in_1 op ... op in_{k-1}}
     * (in that order) of the inputs' float32 elements from byte {@code inOffset} on, {@code count} of them,
     * divided by {@code divisor} unless it is 1 (AVG). Block by block, all inputs are read before any
     * output is written, so outputs may be inputs.
     */
    void reduceFloatToAll(ReduceOp op, long[] inputs, int k, long inOffset, long[] outputs, int m, long outOffset,
                          long count, int divisor) {
        float[] x = fa;
        float[] y = fb;
        for (long done = 0; done < count; done += x.length) {
            int n = (int) Math.min(x.length, count - done);
            long off = inOffset + (done << 2);
            long bytes = (long) n << 2;
            UnsafeApi.copyMemory(null, inputs[0] + off, x, FLOAT_BASE, bytes);
            for (int p = 1; p < k; p++) {
                UnsafeApi.copyMemory(null, inputs[p] + off, y, FLOAT_BASE, bytes);
                combine(op, x, y, n);
            }
            if (divisor != 1) {
                for (int i = 0; i < n; i++) {
                    x[i] = x[i] / divisor;
                }
            }
            for (int q = 0; q < m; q++) {
                UnsafeApi.copyMemory(x, FLOAT_BASE, null, outputs[q] + outOffset + (done << 2), bytes);
            }
        }
    }

    /** {@link #reduceFloatToAll} or {@link #reduceDoubleToAll}, by {@code type} (FLOAT32 or FLOAT64). */
    void reduceToAll(DataType type, ReduceOp op, long[] inputs, int k, long inOffset, long[] outputs, int m,
                     long outOffset, long count, int divisor) {
        if (type == DataType.FLOAT32) {
            reduceFloatToAll(op, inputs, k, inOffset, outputs, m, outOffset, count, divisor);
        } else {
            reduceDoubleToAll(op, inputs, k, inOffset, outputs, m, outOffset, count, divisor);
        }
    }

    /**
     * {@link #reduceToAll} into {@code scratch} (count elements from its start) instead of outputs:
     * for callers that then copy the result out with {@link org.sparkccl.core.copy.BulkCopy}.
     */
    void reduceInto(DataType type, ReduceOp op, long[] inputs, int k, long inOffset, long scratch, long count,
                    int divisor) {
        single[0] = scratch;
        reduceToAll(type, op, inputs, k, inOffset, single, 1, 0, count, divisor);
    }

    /** {@code out[i] = a[i] op b[i]} for float64; {@code out} may be {@code a} or {@code b}. */
    void reduceDouble(ReduceOp op, long a, long b, long out, long count) {
        pair[0] = a;
        pair[1] = b;
        single[0] = out;
        reduceDoubleToAll(op, pair, 2, 0, single, 1, 0, count, 1);
    }

    /** {@link #reduceFloatToAll} for float64. */
    void reduceDoubleToAll(ReduceOp op, long[] inputs, int k, long inOffset, long[] outputs, int m, long outOffset,
                           long count, int divisor) {
        double[] x = da;
        double[] y = db;
        for (long done = 0; done < count; done += x.length) {
            int n = (int) Math.min(x.length, count - done);
            long off = inOffset + (done << 3);
            long bytes = (long) n << 3;
            UnsafeApi.copyMemory(null, inputs[0] + off, x, DOUBLE_BASE, bytes);
            for (int p = 1; p < k; p++) {
                UnsafeApi.copyMemory(null, inputs[p] + off, y, DOUBLE_BASE, bytes);
                combine(op, x, y, n);
            }
            if (divisor != 1) {
                for (int i = 0; i < n; i++) {
                    x[i] = x[i] / divisor;
                }
            }
            for (int q = 0; q < m; q++) {
                UnsafeApi.copyMemory(x, DOUBLE_BASE, null, outputs[q] + outOffset + (done << 3), bytes);
            }
        }
    }

    /** {@code x[i] = x[i] op y[i]} for i below n: plain array loops, which C2 turns into SIMD. */
    private static void combine(ReduceOp op, float[] x, float[] y, int n) {
        switch (op) {
            case SUM:
            case AVG:
                for (int i = 0; i < n; i++) {
                    x[i] = x[i] + y[i];
                }
                break;
            case PROD:
                for (int i = 0; i < n; i++) {
                    x[i] = x[i] * y[i];
                }
                break;
            case MIN:
                for (int i = 0; i < n; i++) {
                    x[i] = Math.min(x[i], y[i]);
                }
                break;
            case MAX:
                for (int i = 0; i < n; i++) {
                    x[i] = Math.max(x[i], y[i]);
                }
                break;
            default: throw new IllegalArgumentException("unsupported op " + op);
        }
    }

    private static void combine(ReduceOp op, double[] x, double[] y, int n) {
        switch (op) {
            case SUM:
            case AVG:
                for (int i = 0; i < n; i++) {
                    x[i] = x[i] + y[i];
                }
                break;
            case PROD:
                for (int i = 0; i < n; i++) {
                    x[i] = x[i] * y[i];
                }
                break;
            case MIN:
                for (int i = 0; i < n; i++) {
                    x[i] = Math.min(x[i], y[i]);
                }
                break;
            case MAX:
                for (int i = 0; i < n; i++) {
                    x[i] = Math.max(x[i], y[i]);
                }
                break;
            default: throw new IllegalArgumentException("unsupported op " + op);
        }
    }
}
