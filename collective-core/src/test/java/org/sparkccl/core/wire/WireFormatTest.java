package org.sparkccl.core.wire;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/** A sealed message round-trips, as bytes and over a stream; each kind of refusal says what and why. */
class WireFormatTest {
    private static final WireFormat TEST = WireFormat.sealed("test blob", 0x54455354, 3); // "TEST"
    private static final byte[] BODY = {1, 2, 3, 4, 5};

    @Test
    void roundTrips() throws IOException {
        byte[] sealed = TEST.seal(BODY);
        assertEquals(WireFormat.ENVELOPE_BYTES + BODY.length, sealed.length);
        ByteBuffer b = ByteBuffer.wrap(sealed);
        assertEquals(0x54455354, b.getInt(0));
        assertEquals(3, b.getInt(4));
        assertEquals(BODY.length, b.getInt(8));
        assertArrayEquals(BODY, remaining(TEST.open(sealed, "rank 1")));
        assertEquals(0, TEST.open(sealed, BODY.length, "rank 1").position());
        assertEquals(0, TEST.open(TEST.seal(new byte[0]), 0, "rank 1").remaining());

        ByteArrayOutputStream stream = new ByteArrayOutputStream();
        TEST.write(new DataOutputStream(stream), BODY);
        assertArrayEquals(sealed, stream.toByteArray(), "a stream carries the same bytes");
        assertArrayEquals(BODY, TEST.read(input(sealed), 100, "rank 1"));
    }

    @Test
    void refusesAnotherFormat() {
        byte[] other = WireFormat.sealed("other blob", 0x4F544852, 3).seal(BODY);
        String message = refusal(() -> TEST.open(other, "rank 2"));
        assertEquals("refused the test blob from rank 2: magic 0x4f544852, expected 0x54455354; it is not a sparkccl"
                + " test blob: another program wrote it, or a message of another kind was passed where this one"
                + " belongs", message);
        assertTrue(refusal(() -> TEST.read(input(other), 100, "rank 2")).contains("magic 0x4f544852"));
    }

    @Test
    void refusesAnotherVersion() {
        byte[] newer = WireFormat.sealed("test blob", 0x54455354, 4).seal(BODY);
        String message = refusal(() -> TEST.open(newer, "rank 2"));
        assertEquals("refused the test blob from rank 2: version 4, this build reads version 3; the ranks run different"
                + " sparkccl builds: use the same sparkccl jar on every executor", message);
        assertTrue(refusal(() -> TEST.read(input(newer), 100, "rank 2")).contains("version 4, this build reads"));
    }

    @Test
    void refusesTruncatedAndLengthenedMessages() {
        byte[] sealed = TEST.seal(BODY);
        String cut = refusal(() -> TEST.open(Arrays.copyOf(sealed, sealed.length - 1), "rank 2"));
        assertTrue(cut.startsWith("refused the test blob from rank 2: its header announces a body of 5 bytes, but 4"
                + " arrived; it was truncated"), cut);
        assertTrue(refusal(() -> TEST.open(Arrays.copyOf(sealed, 3), "rank 2")).contains("3 bytes, expected at least"));
        assertTrue(refusal(() -> TEST.open(Arrays.copyOf(sealed, sealed.length + 1), "rank 2"))
                .contains("but 6 arrived"));
        assertTrue(refusal(() -> TEST.open(sealed, 8, "rank 2")).contains("a body of 5 bytes, expected 8"));
        assertTrue(refusal(() -> TEST.open(null, "rank 2")).contains("it is missing"));
        assertThrows(EOFException.class, () -> TEST.read(input(Arrays.copyOf(sealed, sealed.length - 1)), 100, "x"));
    }

    @Test
    void refusesCorruptedMessages() {
        byte[] flipped = TEST.seal(BODY);
        flipped[WireFormat.HEADER_BYTES + 2] ^= 0x10;
        String message = refusal(() -> TEST.open(flipped, "rank 2"));
        assertTrue(message.startsWith("refused the test blob from rank 2: checksum 0x"), message);
        assertTrue(message.endsWith("it was corrupted in transit or in memory; nothing of it was used"), message);
        assertTrue(refusal(() -> TEST.read(input(flipped), 100, "rank 2")).contains("corrupted"));
    }

    @Test
    void aStreamRefusesALengthOverItsBound() {
        String message = refusal(() -> TEST.read(input(TEST.seal(new byte[101])), 100, "a connection"));
        assertTrue(message.contains("announces a body of 101 bytes, at most 100 expected"), message);
    }

    @Test
    void formatChecksShareTheShape() {
        assertEquals("refused the test blob from rank 2: it says rank 3; it belongs to another job",
                TEST.refused("rank 2", "it says rank 3", "it belongs to another job").getMessage());
        assertTrue(TEST.malformed("rank 2", "7 entries").getMessage()
                .endsWith("7 entries; its checksum is right, so the sender wrote it wrong: report a sparkccl bug"));
    }

    @Test
    void anInPlaceHeaderChecksMagicAndVersionOnly() {
        WireFormat segment = WireFormat.inPlace("test segment", 0x6c63636b72617073L, 1);
        segment.checkHeader(0x6c63636b72617073L, 1, "rank 1");
        assertTrue(refusal(() -> segment.checkHeader(0, 1, "rank 1")).contains("magic 0x0, expected 0x6c63636b72617073"));
        assertTrue(refusal(() -> segment.checkHeader(0x6c63636b72617073L, 2, "rank 1")).contains("version 2"));
        assertThrows(IllegalStateException.class, () -> segment.seal(BODY));
    }

    private interface Decode {
        void run() throws Exception;
    }

    private static String refusal(Decode decode) {
        return assertThrows(WireFormatException.class, decode::run).getMessage();
    }

    private static DataInputStream input(byte[] bytes) {
        return new DataInputStream(new ByteArrayInputStream(bytes));
    }

    private static byte[] remaining(ByteBuffer b) {
        byte[] out = new byte[b.remaining()];
        b.get(out);
        return out;
    }
}
