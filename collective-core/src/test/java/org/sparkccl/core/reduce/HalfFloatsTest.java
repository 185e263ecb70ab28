package org.sparkccl.core.reduce;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Random;
import org.junit.jupiter.api.Test;

class HalfFloatsTest {

    @Test
    void everyHalfSurvivesARoundTripThroughFloat() {
        for (int h = 0; h < 0x10000; h++) {
            float f = HalfFloats.halfToFloat((short) h);
            if (Float.isNaN(f)) {
                assertTrue((h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0, "NaN from a non-NaN half " + h);
                continue;
            }
            assertEquals((short) h, HalfFloats.floatToHalf(f), "half bits " + Integer.toHexString(h));
        }
    }

    @Test
    void floatToHalfRoundsToNearestEven() {
        Random random = new Random(7);
        for (int i = 0; i < 200_000; i++) {
            float f = (float) ((random.nextDouble() * 2 - 1) * Math.pow(2, random.nextInt(40) - 26));
            short h = HalfFloats.floatToHalf(f);
            double got = HalfFloats.halfToFloat(h);
            // No half lies strictly closer to f than the one we picked.
            double up = HalfFloats.halfToFloat(next(h, +1));
            double down = HalfFloats.halfToFloat(next(h, -1));
            double err = Math.abs(got - f);
            if (!Double.isInfinite(got)) {
                assertTrue(err <= Math.abs(up - f) && err <= Math.abs(down - f), "f=" + f + " half=" + got);
            }
        }
        assertEquals(0x3c00, HalfFloats.floatToHalf(1.0f));
        assertEquals((short) 0xc000, HalfFloats.floatToHalf(-2.0f));
        assertEquals(0x7c00, HalfFloats.floatToHalf(65520f)); // rounds to infinity
        assertEquals(0x7bff, HalfFloats.floatToHalf(65519f));
        assertEquals(0x0001, HalfFloats.floatToHalf(0x1p-24f)); // smallest subnormal
        assertEquals(0x0000, HalfFloats.floatToHalf(0x1p-25f)); // tie to even: 0
        assertEquals(0x3c00, HalfFloats.floatToHalf(1.0f + 0x1p-11f)); // tie between 1 and 1+2^-10: even is 1
    }

    @Test
    void bfloat16RoundsToNearestEvenAndKeepsNaN() {
        assertEquals((short) 0x3f80, HalfFloats.floatToBfloat16(1.0f));
        assertEquals((short) 0x3f80, HalfFloats.floatToBfloat16(Float.intBitsToFloat(0x3f808000))); // tie -> even
        assertEquals((short) 0x3f82, HalfFloats.floatToBfloat16(Float.intBitsToFloat(0x3f818000))); // tie -> even (up)
        assertEquals((short) 0x3f81, HalfFloats.floatToBfloat16(Float.intBitsToFloat(0x3f808001)));
        assertTrue(Float.isNaN(HalfFloats.bfloat16ToFloat(HalfFloats.floatToBfloat16(Float.NaN))));
        for (int b = 0; b < 0x10000; b++) {
            float f = HalfFloats.bfloat16ToFloat((short) b);
            if (!Float.isNaN(f)) {
                assertEquals((short) b, HalfFloats.floatToBfloat16(f));
            }
        }
    }

    @Test
    void bfloat16IsTheNearestValue() {
        Random random = new Random(11);
        for (int i = 0; i < 100_000; i++) {
            float x = (float) (random.nextGaussian() * Math.pow(10, random.nextInt(20) - 10));
            short b = HalfFloats.floatToBfloat16(x);
            double err = Math.abs((double) x - HalfFloats.bfloat16ToFloat(b));
            // The neighbours of the chosen value are one bfloat16 step away; neither may be closer to x.
            float up = HalfFloats.bfloat16ToFloat((short) (b + 1));
            float down = HalfFloats.bfloat16ToFloat((short) (b - 1));
            assertTrue(err <= Math.abs((double) x - up) && err <= Math.abs((double) x - down), x + " -> bf16 " + b);
        }
    }

    @Test
    void bfloat16KeepsSpecialValues() {
        // A NaN whose payload lives only in the low 16 bits must not turn into infinity.
        assertTrue(Float.isNaN(HalfFloats.bfloat16ToFloat(HalfFloats.floatToBfloat16(Float.intBitsToFloat(0x7f800001)))));
        assertEquals(Float.POSITIVE_INFINITY, HalfFloats.bfloat16ToFloat(HalfFloats.floatToBfloat16(Float.POSITIVE_INFINITY)));
        assertEquals(Float.NEGATIVE_INFINITY, HalfFloats.bfloat16ToFloat(HalfFloats.floatToBfloat16(Float.NEGATIVE_INFINITY)));
        assertEquals(Float.floatToIntBits(-0.0f),
                Float.floatToIntBits(HalfFloats.bfloat16ToFloat(HalfFloats.floatToBfloat16(-0.0f))));
        assertEquals(Float.POSITIVE_INFINITY, HalfFloats.bfloat16ToFloat(HalfFloats.floatToBfloat16(Float.MAX_VALUE)),
                "values past the largest bfloat16 round to infinity");
    }

    private static short next(short h, int dir) {
        int bits = h & 0xffff;
        boolean negative = (bits & 0x8000) != 0;
        int mag = bits & 0x7fff;
        int towardsUp = negative ? -dir : dir;
        mag = Math.max(0, Math.min(0x7c00, mag + towardsUp));
        return (short) ((negative ? 0x8000 : 0) | mag);
    }
}
