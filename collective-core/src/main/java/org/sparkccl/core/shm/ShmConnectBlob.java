package org.sparkccl.core.shm;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;
import org.sparkccl.core.wire.WireFormat;

/**
 * What a peer needs to open a segment, in a fixed-size sealed {@link WireFormat} message that
 * travels in the rank's description. The body, big-endian:
 *
 * <pre>
 *   0  long   owner pid
 *   8  long   segment size in bytes
 *  16  byte[32] SHA-256 of the owner's host id (HostIdentity.hostId())
 *  48  byte[16] the segment's secret, also in the file's header ({@link ShmSegmentHeader})
 *  64  int    name length
 *  68  byte[64] segment name, ASCII, zero-padded
 * 132
 * </pre>
 *
 * Decoding refuses foreign, other-version, truncated and damaged blobs with a message that says
 * which, and never lets a blob name a file outside the sparkccl naming scheme. (Version 1 had no
 * secret; version 2 no body length, its CRC32C in the last four bytes.)
 */
final class ShmConnectBlob {
    static final WireFormat FORMAT = WireFormat.sealed("SHM connect blob", 0x53484D31, 3); // "SHM1"
    static final int NAME_FIELD = 64;
    static final int BODY_BYTES = 8 + 8 + 32 + ShmSegmentHeader.SECRET_BYTES + 4 + NAME_FIELD;
    static final int SIZE = WireFormat.ENVELOPE_BYTES + BODY_BYTES;

    final long pid;
    final long bytes;
    final byte[] hostDigest;
    final byte[] secret;
    final String name;

    ShmConnectBlob(long pid, long bytes, byte[] hostDigest, byte[] secret, String name) {
        if (hostDigest.length != 32) {
            throw new IllegalArgumentException("host digest must be 32 bytes");
        }
        if (secret.length != ShmSegmentHeader.SECRET_BYTES) {
            throw new IllegalArgumentException("secret must be " + ShmSegmentHeader.SECRET_BYTES + " bytes");
        }
        if (name.length() > NAME_FIELD) {
            throw new IllegalArgumentException("segment name too long: " + name);
        }
        this.pid = pid;
        this.bytes = bytes;
        this.hostDigest = hostDigest.clone();
        this.secret = secret.clone();
        this.name = name;
    }

    /** SHA-256 of a host id: fixed size, and equal exactly when the host ids are equal. */
    static byte[] hostDigest(String hostId) {
        try {
            return MessageDigest.getInstance("SHA-256").digest(hostId.getBytes(StandardCharsets.UTF_8));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is missing from this JVM", e);
        }
    }

    byte[] encode() {
        ByteBuffer b = ByteBuffer.allocate(BODY_BYTES);
        b.putLong(pid).putLong(bytes).put(hostDigest).put(secret);
        byte[] nameBytes = name.getBytes(StandardCharsets.US_ASCII);
        b.putInt(nameBytes.length).put(nameBytes);
        return FORMAT.seal(b.array());
    }

    /** Decodes a blob that {@code from} (e.g. "rank 3 (host h, pid 42)") sent. */
    static ShmConnectBlob decode(byte[] blob, String from) {
        ByteBuffer b = FORMAT.open(blob, BODY_BYTES, from);
        long pid = b.getLong();
        long bytes = b.getLong();
        byte[] digest = new byte[32];
        b.get(digest);
        byte[] secret = new byte[ShmSegmentHeader.SECRET_BYTES];
        b.get(secret);
        int nameLength = b.getInt();
        if (nameLength <= 0 || nameLength > NAME_FIELD) {
            throw FORMAT.malformed(from, "name length " + nameLength + ", expected 1.." + NAME_FIELD);
        }
        byte[] nameBytes = new byte[nameLength];
        b.get(nameBytes);
        for (int i = nameLength; i < NAME_FIELD; i++) {
            if (b.get() != 0) {
                // Every byte counts: a blob that decodes is the one its owner wrote, bit for bit.
                throw FORMAT.malformed(from, "the bytes after the segment name are not zero");
            }
        }
        String name = new String(nameBytes, StandardCharsets.US_ASCII);
        if (ShmSegmentName.ownerPid(name) != pid) {
            throw FORMAT.refused(from, "it names '" + name + "', which is not a sparkccl segment of pid " + pid,
                    "a blob may only name a segment of its owner; nothing was opened");
        }
        if (bytes <= 0 || bytes > Integer.MAX_VALUE) {
            throw FORMAT.malformed(from, "segment size " + bytes + ", expected 1 .. 2 GiB");
        }
        return new ShmConnectBlob(pid, bytes, digest, secret, name);
    }

    boolean sameHostAs(byte[] otherDigest) {
        return MessageDigest.isEqual(hostDigest, otherDigest);
    }

    @Override
    public String toString() {
        return name + " (" + bytes + " bytes, pid " + pid + ", host digest "
                + java.util.HexFormat.of().formatHex(Arrays.copyOf(hostDigest, 4)) + "..)";
    }
}
