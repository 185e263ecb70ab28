package org.sparkccl.core.bootstrap;

import org.sparkccl.core.shm.AllocationMeter;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.Random;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.Size;

/**
 * Random and mutated bootstrap frames (a length, then that many bytes) read as TcpBootstrap reads a
 * peer's: each is either the bytes that were really there or an IOException, and reading never
 * allocates much more than what arrived, whatever length the frame claims (up to 1 GiB is legal).
 *
 * <p>Each property runs jqwik's default number of tries: 1,000 in {@code mvn verify}, 10,000 with
 * {@code -Psoak} (the {@code jqwik.tries} property of the build).
 */
class BootstrapFrameFuzzTest {
    /**
     * What a read may allocate beyond the bytes it was given: one 64 KiB chunk, the exception, and
     * what the first calls load (365 KB measured); a frame length alone could claim up to 1 GiB.
     */
    private static final long ALLOCATION_SLACK = 1 << 20;

    @Property
    void randomFramesAreReadOrRefusedWithinBoundedMemory(@ForAll @Size(max = 200) byte[] bytes) {
        check(bytes);
    }

    @Property
    void mutatedFramesAreReadOrRefusedWithinBoundedMemory(@ForAll long seed) {
        check(mutatedFrame(seed));
    }

    private static void check(byte[] bytes) {
        long before = AllocationMeter.allocatedBytes();
        try {
            byte[] frame = TcpBootstrap.readFrame(new DataInputStream(new ByteArrayInputStream(bytes)));
            assertEquals(ByteBuffer.wrap(bytes).getInt(), frame.length);
            assertTrue(4 + frame.length <= bytes.length);
        } catch (IOException e) {
            assertTrue(e.getMessage() == null || !e.getMessage().isEmpty(), String.valueOf(e));
        }
        long allocated = AllocationMeter.allocatedBytes() - before;
        assertTrue(allocated < bytes.length + ALLOCATION_SLACK, "reading " + bytes.length + " bytes allocated "
                + allocated);
    }

    /** A well-formed frame of 0..100 bytes with 1..4 bytes changed, or cut short, or both. */
    private static byte[] mutatedFrame(long seed) {
        Random random = new Random(seed);
        byte[] data = new byte[random.nextInt(101)];
        random.nextBytes(data);
        byte[] frame = ByteBuffer.allocate(4 + data.length).putInt(data.length).put(data).array();
        for (int i = 1 + random.nextInt(4); i > 0; i--) {
            frame[random.nextInt(frame.length)] ^= (byte) (1 + random.nextInt(255));
        }
        return random.nextBoolean() ? frame : java.util.Arrays.copyOf(frame, random.nextInt(frame.length + 1));
    }
}
