package org.sparkccl.arrow;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Random;
import org.junit.jupiter.api.Test;

class BFloat16Test {
    @Test
    void roundsToTheNearestRepresentableValue() {
        Random rnd = new Random(11);
        for (int i = 0; i < 100_000; i++) {
            float x = (float) (rnd.nextGaussian() * Math.pow(10, rnd.nextInt(20) - 10));
            short b = BFloat16.fromFloat(x);
            float back = BFloat16.toFloat(b);
            // The neighbours of the chosen value are one bfloat16 step away; neither may be closer to x.
            float up = BFloat16.toFloat((short) (b + 1));
            float down = BFloat16.toFloat((short) (b - 1));
            double err = Math.abs((double) x - back);
            assertTrue(err <= Math.abs((double) x - up), x + " -> " + back + ", but " + up + " is closer");
            assertTrue(err <= Math.abs((double) x - down), x + " -> " + back + ", but " + down + " is closer");
        }
    }

    @Test
    void tiesGoToEven() {
        // 1 + 2^-8 lies exactly between 1 (even mantissa) and 1 + 2^-7 (odd): it must round down.
        assertEquals(1.0f, BFloat16.toFloat(BFloat16.fromFloat(1.0f + 0x1p-8f)));
        // 1 + 3 * 2^-8 lies between 1 + 2^-7 (odd) and 1 + 2^-6 (even): it must round up.
        assertEquals(1.0f + 0x1p-6f, BFloat16.toFloat(BFloat16.fromFloat(1.0f + 3 * 0x1p-8f)));
    }

    @Test
    void specialValuesSurvive() {
        assertTrue(Float.isNaN(BFloat16.toFloat(BFloat16.fromFloat(Float.NaN))));
        // A NaN whose payload lives only in the low 16 bits must not turn into infinity.
        assertTrue(Float.isNaN(BFloat16.toFloat(BFloat16.fromFloat(Float.intBitsToFloat(0x7F800001)))));
        assertEquals(Float.POSITIVE_INFINITY, BFloat16.toFloat(BFloat16.fromFloat(Float.POSITIVE_INFINITY)));
        assertEquals(Float.NEGATIVE_INFINITY, BFloat16.toFloat(BFloat16.fromFloat(Float.NEGATIVE_INFINITY)));
        assertEquals(Float.floatToIntBits(-0.0f), Float.floatToIntBits(BFloat16.toFloat(BFloat16.fromFloat(-0.0f))));
        assertEquals(Float.POSITIVE_INFINITY, BFloat16.toFloat(BFloat16.fromFloat(Float.MAX_VALUE)),
                "values past the largest bfloat16 round to infinity");
    }
}
