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
import org.sparkccl.core.wire.WireFormat;
import org.sparkccl.core.wire.WireFormatException;

/**
 * Random and mutated bootstrap messages (sealed: magic, version, length, that many bytes, CRC32C)
 * read as TcpBootstrap reads a peer's: each is either the body that was really there or a refusal
 * (an IOException or a {@link WireFormatException}), and reading never allocates much more than what
 * arrived, whatever length the message claims (up to 1 GiB is legal).
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
            byte[] body = TcpBootstrap.FORMAT.read(new DataInputStream(new ByteArrayInputStream(bytes)),
                    TcpBootstrap.MAX_FRAME_BYTES, "the test");
            assertEquals(ByteBuffer.wrap(bytes).getInt(8), body.length);
            assertTrue(WireFormat.ENVELOPE_BYTES + body.length <= bytes.length);
        } catch (IOException e) {
            assertTrue(e.getMessage() == null || !e.getMessage().isEmpty(), String.valueOf(e));
        } catch (WireFormatException e) {
            assertTrue(e.getMessage().startsWith("refused the bootstrap message from the test: "), e.getMessage());
        }
        long allocated = AllocationMeter.allocatedBytes() - before;
        assertTrue(allocated < bytes.length + ALLOCATION_SLACK, "reading " + bytes.length + " bytes allocated "
                + allocated);
    }

    /** A well-formed message of 0..100 bytes with 1..4 bytes changed, or cut short, or both. */
    private static byte[] mutatedFrame(long seed) {
        Random random = new Random(seed);
        byte[] data = new byte[random.nextInt(101)];
        random.nextBytes(data);
        byte[] frame = TcpBootstrap.FORMAT.seal(data);
        for (int i = 1 + random.nextInt(4); i > 0; i--) {
            frame[random.nextInt(frame.length)] ^= (byte) (1 + random.nextInt(255));
        }
        return random.nextBoolean() ? frame : java.util.Arrays.copyOf(frame, random.nextInt(frame.length + 1));
    }
}
