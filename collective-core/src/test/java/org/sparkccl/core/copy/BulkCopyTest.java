package org.sparkccl.core.copy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Random;
import org.agrona.UnsafeApi;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.sparkccl.core.jdk.JdkAccess;

class BulkCopyTest {
    static {
        JdkAccess.ensureAgronaAccess(); // the test touches Agrona before BulkCopy does (run alone, it came first)
    }

    private static final int GUARD = 64;

    @Test
    void usesLibcOnLinux() {
        // CI and the GPU machine are Linux with JNA on the class path: the fast path must be the one tested.
        if (System.getProperty("os.name").toLowerCase().contains("linux") && System.getenv("SPARKCCL_NATIVE_COPY") == null) {
            assertTrue(BulkCopy.isNative(), BulkCopy.describe());
        }
    }

    @ParameterizedTest
    @ValueSource(longs = {0, 1, 4095, 32 * 1024 - 1, 32 * 1024, 32 * 1024 + 5, 256 * 1024, 256 * 1024 + 13,
            (1 << 20) + 7, 3 * (1 << 20) + 4093})
    void copiesExactlyTheBytesAskedFor(long bytes) {
        Random random = new Random(bytes);
        long total = bytes + 2 * GUARD;
        long src = UnsafeApi.allocateMemory(total);
        long dst = UnsafeApi.allocateMemory(total);
        try {
            for (long i = 0; i < total; i++) {
                UnsafeApi.putByte(src + i, (byte) random.nextInt());
                UnsafeApi.putByte(dst + i, (byte) 0x5A);
            }
            BulkCopy.copy(src + GUARD, dst + GUARD, bytes);
            long wrong = 0;
            for (long i = 0; i < total; i++) {
                boolean inside = i >= GUARD && i < GUARD + bytes;
                byte expected = inside ? UnsafeApi.getByte(src + i) : (byte) 0x5A;
                if (UnsafeApi.getByte(dst + i) != expected) {
                    wrong++;
                }
            }
            assertEquals(0, wrong, "bytes wrong after copying " + bytes + " (guard bytes included)");
        } finally {
            UnsafeApi.freeMemory(src);
            UnsafeApi.freeMemory(dst);
        }
    }
}
