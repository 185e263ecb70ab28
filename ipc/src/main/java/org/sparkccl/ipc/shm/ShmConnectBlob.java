package org.sparkccl.ipc.shm;

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
 *  56  int    name length
 *  60  byte[64] segment name, ASCII, zero-padded
 * 124  int    CRC32C of bytes 0..123
 * 128
 * </pre>
 *
 * Decoding refuses foreign, other-version, truncated and damaged blobs with a message that says
 * which, and never lets a blob name a file outside the sparkccl naming scheme.
 */
final class ShmConnectBlob {
    static final int MAGIC = 0x53484D31;
    static final int VERSION = 1;
    static final int SIZE = 128;
    static final int NAME_FIELD = 64;
    private static final int CRC_OFFSET = SIZE - 4;

    final long pid;
    final long bytes;
    final byte[] hostDigest;
    final String name;

    ShmConnectBlob(long pid, long bytes, byte[] hostDigest, String name) {
        if (hostDigest.length != 32) {
            throw new IllegalArgumentException("host digest must be 32 bytes");
        }
        if (name.length() > NAME_FIELD) {
            throw new IllegalArgumentException("segment name too long: " + name);
        }
        this.pid = pid;
        this.bytes = bytes;
        this.hostDigest = hostDigest.clone();
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
        b.putInt(MAGIC).putInt(VERSION).putLong(pid).putLong(bytes).put(hostDigest);
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
        int nameLength = b.getInt();
        if (nameLength <= 0 || nameLength > NAME_FIELD) {
            throw new IllegalArgumentException("the SHM connect blob from " + from + " is damaged (name length "
                    + nameLength + ")");
        }
        byte[] nameBytes = new byte[nameLength];
        b.get(nameBytes);
        String name = new String(nameBytes, StandardCharsets.US_ASCII);
        if (ShmSegmentName.ownerPid(name) != pid) {
            throw new IllegalArgumentException("the SHM connect blob from " + from + " names '" + name
                    + "', which is not a sparkccl segment of pid " + pid);
        }
        if (bytes <= 0 || bytes > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("the SHM connect blob from " + from + " is damaged (segment size "
                    + bytes + ")");
        }
        return new ShmConnectBlob(pid, bytes, digest, name);
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
