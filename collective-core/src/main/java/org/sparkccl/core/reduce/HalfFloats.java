package org.sparkccl.core.reduce;

/**
 * IEEE 754 binary16 and bfloat16 conversions to and from float, rounding to nearest even, as CUDA's
 * {@code __float2half_rn} and {@code __float2bfloat16_rn} do (and, for binary16, Arrow's own Float16:
 * the same result for every float). Narrowing turns a NaN into a quiet NaN of the same sign;
 * widening keeps the bits. The one home of half floats: the reductions and arrow-bridge's element
 * types both use it. (Java 17 has no Float.float16ToFloat.)
 */
public final class HalfFloats {
    private HalfFloats() {
    }

    public static float halfToFloat(short h) {
        int bits = h & 0xffff;
        int sign = (bits & 0x8000) << 16;
        int exp = (bits >>> 10) & 0x1f;
        int mant = bits & 0x3ff;
        if (exp == 0x1f) {
            return Float.intBitsToFloat(sign | 0x7f800000 | (mant << 13));
        }
        if (exp == 0) {
            if (mant == 0) {
                return Float.intBitsToFloat(sign);
            }
            // Subnormal half: value = mant * 2^-24, exactly representable as a float.
            float v = mant * 0x1p-24f;
            return sign == 0 ? v : -v;
        }
        return Float.intBitsToFloat(sign | ((exp + 112) << 23) | (mant << 13));
    }

    public static short floatToHalf(float f) {
        int bits = Float.floatToRawIntBits(f);
        int sign = (bits >>> 16) & 0x8000;
        int abs = bits & 0x7fffffff;
        if (abs >= 0x7f800000) {
            // Inf stays Inf; NaN stays a quiet NaN.
            return (short) (sign | 0x7c00 | (abs > 0x7f800000 ? 0x200 : 0));
        }
        if (abs >= 0x477ff000) {
            // >= 65520 rounds to infinity.
            return (short) (sign | 0x7c00);
        }
        if (abs < 0x38800000) {
            // Below the smallest normal half (2^-14): a subnormal or zero. Round |f| * 2^24 to an integer, ties to even.
            float scaled = Float.intBitsToFloat(abs) * 0x1p24f;
            int m = (int) Math.rint(scaled);
            return (short) (sign | m);
        }
        int exp = (abs >>> 23) - 112;
        int mant = abs & 0x7fffff;
        int half = (exp << 10) | (mant >>> 13);
        int rest = mant & 0x1fff;
        if (rest > 0x1000 || (rest == 0x1000 && (half & 1) != 0)) {
            half++; // may carry into the exponent, which is the right result
        }
        return (short) (sign | half);
    }

    public static float bfloat16ToFloat(short b) {
        return Float.intBitsToFloat((b & 0xffff) << 16);
    }

    public static short floatToBfloat16(float f) {
        int bits = Float.floatToRawIntBits(f);
        if ((bits & 0x7fffffff) > 0x7f800000) {
            return (short) ((bits >>> 16) | 0x40); // quiet NaN
        }
        int lsb = (bits >>> 16) & 1;
        return (short) ((bits + 0x7fff + lsb) >>> 16);
    }
}
