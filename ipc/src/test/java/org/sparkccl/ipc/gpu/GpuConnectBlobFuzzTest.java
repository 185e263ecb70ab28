package org.sparkccl.ipc.gpu;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.Random;
import net.jqwik.api.Assume;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.Size;
import org.sparkccl.core.wire.WireFormatException;

/**
 * Random and mutated GPU connect blobs are refused by {@link GpuConnectBlob#decode} with a message
 * naming the rank whose blob it is, before anything is opened (no GPU needed: decoding is plain Java).
 *
 * <p>Each property runs jqwik's default number of tries: 1,000 in {@code mvn verify}, 10,000 with
 * {@code -Psoak} (the {@code jqwik.tries} property of the build).
 */
class GpuConnectBlobFuzzTest {
    private static final byte[] HOST = GpuConnectBlob.hostHash("host-a/boot-1");
    private static final byte[] VALID = new GpuConnectBlob(GpuConnectBlob.KIND_DEVICE, 2, 4, HOST, 1234,
            new byte[16], "0000:19:00.0", 4096, 1 << 20, new byte[16], new byte[64], 0x7f0000001000L).encode();
    private static final byte[] SOCKET_ID = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    private static final byte[] VALID_DESCRIPTOR = new GpuConnectBlob(GpuConnectBlob.KIND_DEVICE_FD, 2, 4, HOST, 1234,
            new byte[16], "0000:19:00.0", 0, 1 << 20, new byte[16], new byte[64], 0x7f0000001000L, SOCKET_ID, 2 << 20)
            .encode();

    @Property
    void randomBlobsAreRefused(@ForAll @Size(max = 300) byte[] blob) {
        assertRefused(blob);
    }

    @Property
    void mutatedBlobsAreRefused(@ForAll long seed) {
        assertRefused(mutated(VALID, seed));
    }

    @Property
    void mutatedDescriptorBlobsAreRefused(@ForAll long seed) {
        assertRefused(mutated(VALID_DESCRIPTOR, seed));
    }

    private static void assertRefused(byte[] blob) {
        Assume.that(!Arrays.equals(blob, VALID) && !Arrays.equals(blob, VALID_DESCRIPTOR));
        String message = assertThrows(WireFormatException.class, () -> GpuConnectBlob.decode(blob, 2, 4, HOST))
                .getMessage();
        assertTrue(message.startsWith("refused the GPU connect blob from rank 2: "), message);
    }

    /** A valid blob cut short, lengthened, or with 1..4 bytes changed anywhere (padding included). */
    private static byte[] mutated(byte[] valid, long seed) {
        Random random = new Random(seed);
        byte[] blob = valid.clone();
        switch (random.nextInt(4)) {
            case 0:
                return Arrays.copyOf(blob, random.nextInt(blob.length));
            case 1:
                return Arrays.copyOf(blob, blob.length + 1 + random.nextInt(64));
            default:
                for (int i = 1 + random.nextInt(4); i > 0; i--) {
                    blob[random.nextInt(blob.length)] ^= (byte) (1 + random.nextInt(255));
                }
                return blob;
        }
    }
}
