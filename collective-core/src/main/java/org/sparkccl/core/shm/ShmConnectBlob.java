package org.sparkccl.core.shm;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;
import java.util.zip.CRC32C;

/**
 * What a peer needs to open a segment, in a fixed-size, versioned, big-endian form that travels
 * in the rank's description:
 *
 * <pre>
 *   0  int    magic "SHM1" (0x53484D31)
 *   4  int    version
 *   8  long   owner pid
 *  16  long   segment size in bytes
 *  24  byte[32] SHA-256 of the owner's host id (HostIdentity.hostId())
 *  56  byte[16] the segment's secret, also in the file's header ({@link ShmSegmentHeader})
 *  72  int    name length
 *  76  byte[64] segment name, ASCII, zero-padded
 * 140  int    CRC32C of bytes 0..139
 * 144
 * </pre>
 *
 * Decoding refuses foreign, other-version, truncated and damaged blobs with a message that says
 * which, and never lets a blob name a file outside the sparkccl naming scheme. (Version 1 had no
 * secret.)
 */
final class ShmConnectBlob {
    static final int MAGIC = 0x53484D31;
    static final int VERSION = 2;
    static final int SIZE = 144;
    static final int NAME_FIELD = 64;
    private static final int CRC_OFFSET = SIZE - 4;

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
        ByteBuffer b = ByteBuffer.allocate(SIZE).order(ByteOrder.BIG_ENDIAN);
        b.putInt(MAGIC).putInt(VERSION).putLong(pid).putLong(bytes).put(hostDigest).put(secret);
        byte[] nameBytes = name.getBytes(StandardCharsets.US_ASCII);
        b.putInt(nameBytes.length).put(nameBytes);
        CRC32C crc = new CRC32C();
        crc.update(b.array(), 0, CRC_OFFSET);
        b.putInt(CRC_OFFSET, (int) crc.getValue());
        return b.array();
    }

    /** Decodes a blob that {@code from} (e.g. "rank 3 (host h, pid 42)") sent. */
    static ShmConnectBlob decode(byte[] blob, String from) {
        if (blob == null || blob.length < 8) {
            throw new IllegalArgumentException("the SHM connect blob from " + from + " is truncated ("
                    + (blob == null ? "missing" : blob.length + " bytes") + ", expected " + SIZE + ")");
        }
        ByteBuffer b = ByteBuffer.wrap(blob).order(ByteOrder.BIG_ENDIAN);
        int magic = b.getInt();
        if (magic != MAGIC) {
            throw new IllegalArgumentException("the SHM connect blob from " + from + " is not a sparkccl SHM blob"
                    + " (magic 0x" + Integer.toHexString(magic) + ", expected 0x" + Integer.toHexString(MAGIC)
                    + "): it was written by another program, or by another transport");
        }
        int version = b.getInt();
        if (version != VERSION) {
            throw new IllegalArgumentException("the SHM connect blob from " + from + " has version " + version
                    + ", this rank understands version " + VERSION + ": run the same sparkccl jar on every executor");
        }
        if (blob.length != SIZE) {
            throw new IllegalArgumentException("the SHM connect blob from " + from + " is "
                    + (blob.length < SIZE ? "truncated" : "too long") + " (" + blob.length + " bytes, expected "
                    + SIZE + "): the description was damaged in transit");
        }
        CRC32C crc = new CRC32C();
        crc.update(blob, 0, CRC_OFFSET);
        if ((int) crc.getValue() != b.getInt(CRC_OFFSET)) {
            throw new IllegalArgumentException("the SHM connect blob from " + from
                    + " is damaged (checksum mismatch): the description was altered in transit");
        }
        long pid = b.getLong();
        long bytes = b.getLong();
        byte[] digest = new byte[32];
        b.get(digest);
        byte[] secret = new byte[ShmSegmentHeader.SECRET_BYTES];
        b.get(secret);
        int nameLength = b.getInt();
        if (nameLength <= 0 || nameLength > NAME_FIELD) {
            throw new IllegalArgumentException("the SHM connect blob from " + from + " is damaged (name length "
                    + nameLength + ")");
        }
        byte[] nameBytes = new byte[nameLength];
        b.get(nameBytes);
        for (int i = nameLength; i < NAME_FIELD; i++) {
            if (b.get() != 0) {
                // Every byte counts: a blob that decodes is the one its owner wrote, bit for bit.
                throw new IllegalArgumentException("the SHM connect blob from " + from + " is damaged (bytes after the"
                        + " segment name are not zero)");
            }
        }
        String name = new String(nameBytes, StandardCharsets.US_ASCII);
        if (ShmSegmentName.ownerPid(name) != pid) {
            throw new IllegalArgumentException("the SHM connect blob from " + from + " names '" + name
                    + "', which is not a sparkccl segment of pid " + pid);
        }
        if (bytes <= 0 || bytes > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("the SHM connect blob from " + from + " is damaged (segment size "
                    + bytes + ")");
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
