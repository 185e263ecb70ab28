package org.sparkccl.core.reduce;

import org.agrona.UnsafeApi;
import org.sparkccl.core.DataType;
import org.sparkccl.core.jdk.JdkAccess;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.copy.BulkCopy;

/**
 * Elementwise reductions on off-heap memory: {@code out[i] = a[i] op b[i]}. {@code out} may equal
 * {@code a} or {@code b}. AVG combines as SUM; {@link #divide} finishes it once, on the rank that
 * computes a chunk's final value, so every rank receives the same bits. float16 and bfloat16 are
 * computed in float and rounded back at every step, as GPUs do; integers wrap around.
 */
public final class Reduction {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    /**
     * From this many elements on, float32 and float64 go through {@link HeapBlocks}: C2 (Java 17)
     * does not vectorize loops over raw off-heap addresses, but does vectorize the same loop over
     * heap arrays, and two bulk copies in and one out cost less than the scalar loop (measured on the
     * CPU machine, 256 KB float32 sum: see docs/perf/cpu-allreduce.md).
     */
    static final int HEAP_BLOCK_MIN_ELEMENTS = 256;

    private Reduction() {
    }

    public static void reduce(DataType type, ReduceOp op, long a, long b, long out, long count) {
        switch (type) {
            case FLOAT32: reduceFloat(op, a, b, out, count); break;
            case FLOAT64: reduceDouble(op, a, b, out, count); break;
            case INT32: reduceInt(op, a, b, out, count); break;
            case INT64: reduceLong(op, a, b, out, count); break;
            case FLOAT16:
            case BFLOAT16: reduceHalf(type, op, a, b, out, count); break;
            case INT8:
            case UINT8: reduceByte(type, op, a, b, out, count); break;
            default: throw new IllegalArgumentException("unsupported type " + type);
        }
    }

    /**
     * Each of the first {@code m} outputs gets, at {@code offset} for {@code count} elements,
     * {@code inputs[0] op inputs[1] op ... op inputs[k-1]} in that order, finished for AVG (divided
     * by k, as {@link #divide}): the bits {@link #reduce} pair by pair then {@link #divide} give.
     * Outputs may be inputs. {@code scratch}: room for {@code count} elements, where the result is
     * made before it is copied out, unless the type has a fused path and there is one output.
     */
    public static void reduceToAll(DataType type, ReduceOp op, long[] inputs, int k, long[] outputs, int m,
                                   long offset, long count, long scratch) {
        int divisor = op == ReduceOp.AVG ? k : 1;
        boolean fused = (type == DataType.FLOAT32 || type == DataType.FLOAT64) && count >= HEAP_BLOCK_MIN_ELEMENTS;
        if (fused && m == 1) {
            // One output (this rank's own): written block by block, no pass through scratch.
            HeapBlocks.forThread().reduceToAll(type, op, inputs, k, offset, outputs, 1, offset, count, divisor);
            return;
        }
        // Into scratch first, then one bulk copy per output: the outputs are other ranks' memory,
        // whose lines their owners have read, and BulkCopy writes those without fetching them.
        if (fused) {
            HeapBlocks.forThread().reduceInto(type, op, inputs, k, offset, scratch, count, divisor);
        } else {
            if (k == 1) {
                UnsafeApi.copyMemory(inputs[0] + offset, scratch, count * type.size());
            } else {
                reduce(type, op, inputs[0] + offset, inputs[1] + offset, scratch, count);
            }
            for (int p = 2; p < k; p++) {
                reduce(type, op, scratch, inputs[p] + offset, scratch, count);
            }
            divide(type, scratch, count, divisor);
        }
        for (int q = 0; q < m; q++) {
            BulkCopy.copy(scratch, outputs[q] + offset, count * type.size());
        }
    }

    private static void reduceFloat(ReduceOp op, long a, long b, long out, long count) {
        if (count >= HEAP_BLOCK_MIN_ELEMENTS) {
            HeapBlocks.forThread().reduceFloat(op, a, b, out, count);
            return;
        }
        long end = count << 2;
        switch (op) {
            case SUM:
            case AVG:
                for (long i = 0; i < end; i += 4) {
                    UnsafeApi.putFloat(out + i, UnsafeApi.getFloat(a + i) + UnsafeApi.getFloat(b + i));
                }
                break;
            case PROD:
                for (long i = 0; i < end; i += 4) {
                    UnsafeApi.putFloat(out + i, UnsafeApi.getFloat(a + i) * UnsafeApi.getFloat(b + i));
                }
                break;
            case MIN:
                for (long i = 0; i < end; i += 4) {
                    UnsafeApi.putFloat(out + i, Math.min(UnsafeApi.getFloat(a + i), UnsafeApi.getFloat(b + i)));
                }
                break;
            case MAX:
                for (long i = 0; i < end; i += 4) {
                    UnsafeApi.putFloat(out + i, Math.max(UnsafeApi.getFloat(a + i), UnsafeApi.getFloat(b + i)));
                }
                break;
            default: throw new IllegalArgumentException("unsupported op " + op);
        }
    }

    private static void reduceDouble(ReduceOp op, long a, long b, long out, long count) {
        if (count >= HEAP_BLOCK_MIN_ELEMENTS) {
            HeapBlocks.forThread().reduceDouble(op, a, b, out, count);
            return;
        }
        long end = count << 3;
        for (long i = 0; i < end; i += 8) {
            double x = UnsafeApi.getDouble(a + i);
            double y = UnsafeApi.getDouble(b + i);
            UnsafeApi.putDouble(out + i, combine(op, x, y));
        }
    }

    private static void reduceInt(ReduceOp op, long a, long b, long out, long count) {
        long end = count << 2;
        if (op == ReduceOp.SUM || op == ReduceOp.AVG) {
            for (long i = 0; i < end; i += 4) {
                UnsafeApi.putInt(out + i, UnsafeApi.getInt(a + i) + UnsafeApi.getInt(b + i));
            }
            return;
        }
        for (long i = 0; i < end; i += 4) {
            UnsafeApi.putInt(out + i, (int) combine(op, UnsafeApi.getInt(a + i), UnsafeApi.getInt(b + i)));
        }
    }

    private static void reduceLong(ReduceOp op, long a, long b, long out, long count) {
        long end = count << 3;
        for (long i = 0; i < end; i += 8) {
            UnsafeApi.putLong(out + i, combine(op, UnsafeApi.getLong(a + i), UnsafeApi.getLong(b + i)));
        }
    }

    private static void reduceHalf(DataType type, ReduceOp op, long a, long b, long out, long count) {
        boolean bf = type == DataType.BFLOAT16;
        long end = count << 1;
        for (long i = 0; i < end; i += 2) {
            float x = toFloat(bf, UnsafeApi.getShort(a + i));
            float y = toFloat(bf, UnsafeApi.getShort(b + i));
            UnsafeApi.putShort(out + i, fromFloat(bf, (float) combine(op, x, y)));
        }
    }

    private static void reduceByte(DataType type, ReduceOp op, long a, long b, long out, long count) {
        boolean unsigned = type == DataType.UINT8;
        for (long i = 0; i < count; i++) {
            long x = unsigned ? UnsafeApi.getByte(a + i) & 0xff : UnsafeApi.getByte(a + i);
            long y = unsigned ? UnsafeApi.getByte(b + i) & 0xff : UnsafeApi.getByte(b + i);
            UnsafeApi.putByte(out + i, (byte) combine(op, x, y));
        }
    }

    /** {@code data[i] = data[i] / n}: the end of AVG. Integers divide truncating toward zero. */
    public static void divide(DataType type, long data, long count, int n) {
        if (n == 1) {
            return;
        }
        switch (type) {
            case FLOAT32:
                for (long i = 0; i < count << 2; i += 4) {
                    UnsafeApi.putFloat(data + i, UnsafeApi.getFloat(data + i) / n);
                }
                break;
            case FLOAT64:
                for (long i = 0; i < count << 3; i += 8) {
                    UnsafeApi.putDouble(data + i, UnsafeApi.getDouble(data + i) / n);
                }
                break;
            case FLOAT16:
            case BFLOAT16: {
                boolean bf = type == DataType.BFLOAT16;
                for (long i = 0; i < count << 1; i += 2) {
                    UnsafeApi.putShort(data + i, fromFloat(bf, toFloat(bf, UnsafeApi.getShort(data + i)) / n));
                }
                break;
            }
            case INT32:
                for (long i = 0; i < count << 2; i += 4) {
                    UnsafeApi.putInt(data + i, UnsafeApi.getInt(data + i) / n);
                }
                break;
            case INT64:
                for (long i = 0; i < count << 3; i += 8) {
                    UnsafeApi.putLong(data + i, UnsafeApi.getLong(data + i) / n);
                }
                break;
            case INT8:
                for (long i = 0; i < count; i++) {
                    UnsafeApi.putByte(data + i, (byte) (UnsafeApi.getByte(data + i) / n));
                }
                break;
            case UINT8:
                for (long i = 0; i < count; i++) {
                    UnsafeApi.putByte(data + i, (byte) ((UnsafeApi.getByte(data + i) & 0xff) / n));
                }
                break;
            default: throw new IllegalArgumentException("unsupported type " + type);
        }
    }

    /** One step of {@code op} in double (floating types). AVG combines as SUM. */
    public static double combine(ReduceOp op, double x, double y) {
        switch (op) {
            case SUM:
            case AVG: return x + y;
            case PROD: return x * y;
            case MIN: return Math.min(x, y);
            case MAX: return Math.max(x, y);
            default: throw new IllegalArgumentException("unsupported op " + op);
        }
    }

    /** One step of {@code op} on integers; the caller truncates to its width, which wraps as C does. */
    public static long combine(ReduceOp op, long x, long y) {
        switch (op) {
            case SUM:
            case AVG: return x + y;
            case PROD: return x * y;
            case MIN: return Math.min(x, y);
            case MAX: return Math.max(x, y);
            default: throw new IllegalArgumentException("unsupported op " + op);
        }
    }

    private static float toFloat(boolean bf, short v) {
        return bf ? HalfFloats.bfloat16ToFloat(v) : HalfFloats.halfToFloat(v);
    }

    private static short fromFloat(boolean bf, float v) {
        return bf ? HalfFloats.floatToBfloat16(v) : HalfFloats.floatToHalf(v);
    }
}
