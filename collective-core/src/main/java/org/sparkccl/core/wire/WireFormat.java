package org.sparkccl.core.wire;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.zip.CRC32C;

/**
 * One binary format of sparkccl: its name, magic and version, and the envelope every message of it
 * travels in, so that each format refuses foreign, other-build, truncated and corrupted bytes alike
 * and says so in the same words. A sealed message, big-endian:
 *
 * <pre>
 *   0    int    magic
 *   4    int    version
 *   8    int    body length n
 *  12    byte[n] body (the format's own fields)
 *  12+n  int    CRC32C of bytes 0 .. 12+n
 * </pre>
 *
 * Headers that other processes or GPU kernels read in place (a segment's control block) keep their
 * own layout: they are made with {@link #inPlace} and use only {@link #checkHeader} and
 * {@link #refused}.
 */
public final class WireFormat {
    /** Magic, version and body length. */
    public static final int HEADER_BYTES = 12;
    public static final int CHECKSUM_BYTES = 4;
    /** What sealing adds to a body. */
    public static final int ENVELOPE_BYTES = HEADER_BYTES + CHECKSUM_BYTES;
    private static final int READ_CHUNK_BYTES = 64 << 10;
    private static final String MALFORMED_ADVICE = "its checksum is right, so the sender wrote it wrong: report a"
            + " sparkccl bug";

    private final String name;
    private final long magic;
    private final int version;
    private final boolean sealable;

    private WireFormat(String name, long magic, int version, boolean sealable) {
        this.name = name;
        this.magic = magic;
        this.version = version;
        this.sealable = sealable;
    }

    /** A format sent as sealed messages; {@code name} (e.g. "SHM connect blob") goes into every refusal. */
    public static WireFormat sealed(String name, int magic, int version) {
        return new WireFormat(name, magic & 0xFFFF_FFFFL, version, true);
    }

    /** A header read in place by peers or kernels, with a magic of its own width (up to 8 bytes). */
    public static WireFormat inPlace(String name, long magic, int version) {
        return new WireFormat(name, magic, version, false);
    }

    public String name() {
        return name;
    }

    public int version() {
        return version;
    }

    /** {@code body} in this format's envelope. */
    public byte[] seal(byte[] body) {
        requireSealable();
        ByteBuffer b = ByteBuffer.allocate(ENVELOPE_BYTES + body.length).order(ByteOrder.BIG_ENDIAN);
        b.putInt((int) magic).putInt(version).putInt(body.length).put(body);
        b.putInt(checksum(b.array(), HEADER_BYTES + body.length));
        return b.array();
    }

    /**
     * The body of a message that {@code from} (e.g. "rank 3") sent, as a big-endian buffer; refuses a
     * missing, foreign, other-version, truncated or corrupted message.
     */
    public ByteBuffer open(byte[] message, String from) {
        requireSealable();
        if (message == null) {
            throw refused(from, "it is missing", "does that rank run sparkccl, and the same engine as this one?");
        }
        if (message.length < 8) {
            throw truncated(from, message.length + " bytes, expected at least " + ENVELOPE_BYTES);
        }
        ByteBuffer b = ByteBuffer.wrap(message).order(ByteOrder.BIG_ENDIAN);
        checkHeader(b.getInt(0) & 0xFFFF_FFFFL, b.getInt(4), from);
        if (message.length < ENVELOPE_BYTES) {
            throw truncated(from, message.length + " bytes, expected at least " + ENVELOPE_BYTES);
        }
        int length = b.getInt(8);
        if (length < 0 || length != message.length - ENVELOPE_BYTES) {
            throw truncated(from, "its header announces a body of " + length + " bytes, but "
                    + (message.length - ENVELOPE_BYTES) + " arrived");
        }
        int end = HEADER_BYTES + length;
        checkChecksum(b.getInt(end), checksum(message, end), from);
        return ByteBuffer.wrap(message, HEADER_BYTES, length).slice().order(ByteOrder.BIG_ENDIAN);
    }

    /** As {@link #open(byte[], String)}, for a format whose body always has {@code bodyBytes} bytes. */
    public ByteBuffer open(byte[] message, int bodyBytes, String from) {
        ByteBuffer body = open(message, from);
        if (body.remaining() != bodyBytes) {
            throw truncated(from, "a body of " + body.remaining() + " bytes, expected " + bodyBytes);
        }
        return body;
    }

    /** Writes {@code body} sealed (the same bytes as {@link #seal}, without copying the body); does not flush. */
    public void write(DataOutputStream out, byte[] body) throws IOException {
        requireSealable();
        byte[] header = ByteBuffer.allocate(HEADER_BYTES).putInt((int) magic).putInt(version).putInt(body.length).array();
        CRC32C crc = new CRC32C();
        crc.update(header);
        crc.update(body);
        out.write(header);
        out.write(body);
        out.writeInt((int) crc.getValue());
    }

    /**
     * Reads one sealed message of at most {@code maxBodyBytes} from a stream and returns its body.
     * The body is grown as its bytes arrive rather than allocated from the announced length, so a
     * damaged or hostile length costs only what was really sent. Throws {@link WireFormatException}
     * for a refused message and {@link IOException} (EOF included) for a failed stream.
     */
    public byte[] read(DataInputStream in, int maxBodyBytes, String from) throws IOException {
        requireSealable();
        byte[] header = new byte[HEADER_BYTES];
        in.readFully(header, 0, 4);
        ByteBuffer h = ByteBuffer.wrap(header).order(ByteOrder.BIG_ENDIAN);
        checkMagic(h.getInt(0) & 0xFFFF_FFFFL, from);
        in.readFully(header, 4, HEADER_BYTES - 4);
        checkVersion(h.getInt(4), from);
        int length = h.getInt(8);
        if (length < 0 || length > maxBodyBytes) {
            throw refused(from, "its header announces a body of " + length + " bytes, at most " + maxBodyBytes
                    + " expected", "it was corrupted in transit, or the sender is not a sparkccl rank");
        }
        byte[] body = new byte[Math.min(length, READ_CHUNK_BYTES)];
        int have = 0;
        while (have < length) {
            if (have == body.length) {
                body = Arrays.copyOf(body, (int) Math.min(length, 2L * body.length));
            }
            int n = in.read(body, have, body.length - have);
            if (n < 0) {
                throw new EOFException("the " + name + " from " + from + " ended after " + have + " of its " + length
                        + " body bytes");
            }
            have += n;
        }
        int found = in.readInt();
        CRC32C crc = new CRC32C();
        crc.update(header);
        crc.update(body);
        checkChecksum(found, (int) crc.getValue(), from);
        return body;
    }

    /** Refuses a header whose magic or version is not this format's. */
    public void checkHeader(long foundMagic, int foundVersion, String from) {
        checkMagic(foundMagic, from);
        checkVersion(foundVersion, from);
    }

    /** Refuses bytes that do not start with this format's magic. */
    public void checkMagic(long foundMagic, String from) {
        if (foundMagic != magic) {
            throw refused(from, "magic 0x" + Long.toHexString(foundMagic) + ", expected 0x" + Long.toHexString(magic),
                    "it is not a sparkccl " + name + ": another program wrote it, or a message of another kind was"
                            + " passed where this one belongs");
        }
    }

    private void checkVersion(int foundVersion, String from) {
        if (foundVersion != version) {
            throw refused(from, "version " + foundVersion + ", this build reads version " + version,
                    "the ranks run different sparkccl builds: use the same sparkccl jar on every executor");
        }
    }

    private void checkChecksum(int found, int computed, String from) {
        if (found != computed) {
            throw refused(from, "checksum 0x" + Integer.toHexString(found) + ", computed 0x"
                    + Integer.toHexString(computed), "it was corrupted in transit or in memory; nothing of it was used");
        }
    }

    private WireFormatException truncated(String from, String what) {
        return refused(from, what, "it was truncated or damaged in transit");
    }

    /**
     * The one shape of every refusal, for the format's own checks too: "refused the NAME from FROM:
     * WHAT (found against expected); ADVICE".
     */
    public WireFormatException refused(String from, String what, String advice) {
        return new WireFormatException("refused the " + name + " from " + from + ": " + what + "; " + advice);
    }

    /**
     * Refuses a message that passed magic, version, length and checksum but whose body does not
     * parse: its writer wrote it wrong.
     */
    public WireFormatException malformed(String from, String what) {
        return refused(from, what, MALFORMED_ADVICE);
    }

    /** As {@link #malformed(String, String)}, keeping the failure that revealed it. */
    public WireFormatException malformed(String from, String what, Throwable cause) {
        return new WireFormatException("refused the " + name + " from " + from + ": " + what + "; " + MALFORMED_ADVICE,
                cause);
    }

    private void requireSealable() {
        if (!sealable) {
            throw new IllegalStateException("the " + name + " is read in place; it has no sealed form");
        }
    }

    private static int checksum(byte[] bytes, int length) {
        CRC32C crc = new CRC32C();
        crc.update(bytes, 0, length);
        return (int) crc.getValue();
    }

    @Override
    public String toString() {
        return name + " (magic 0x" + Long.toHexString(magic) + ", version " + version + ")";
    }
}
