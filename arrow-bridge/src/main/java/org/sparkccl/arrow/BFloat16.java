package org.sparkccl.arrow;

/**
 * bfloat16: the top 16 bits of a float32 (sign, 8 exponent bits, 7 mantissa bits). Arrow has no
 * bfloat16 type, so sparkccl stores these bits in an Arrow int16 field whose metadata says
 * {@code sparkccl.element_type=bfloat16} (see {@link ElementType#BFLOAT16}).
 */
public final class BFloat16 {
    private BFloat16() {
    }

    public static float toFloat(short bits) {
        return Float.intBitsToFloat((bits & 0xFFFF) << 16);
    }

    /** Rounds to nearest, ties to even, as PyTorch and CUDA's {@code __float2bfloat16} do; NaN stays NaN. */
    public static short fromFloat(float value) {
        int bits = Float.floatToRawIntBits(value);
        if (Float.isNaN(value)) {
            // Keep the sign, force a quiet NaN: truncation alone could clear every mantissa bit (-> infinity).
            return (short) ((bits >>> 16) | 0x0040);
        }
        int roundingBias = 0x7FFF + ((bits >>> 16) & 1);
        return (short) ((bits + roundingBias) >>> 16);
    }
}
