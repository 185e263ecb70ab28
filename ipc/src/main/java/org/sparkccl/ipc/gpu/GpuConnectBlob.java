package org.sparkccl.ipc.gpu;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.zip.CRC32C;

/**
 * What a peer needs to open one of this rank's GPU windows: fixed size ({@link #BYTES}), versioned,
 * big-endian. A device window is either CUDA virtual memory shared as a file descriptor (kind 3: the
 * peer fetches the descriptor from the owner's descriptor server, named by the socket id, presenting
 * the secret, and maps the whole allocation) or, where that is not available, the CUDA IPC handle of
 * its allocation's base plus an offset (kind 1); same-process peers use the raw pointer instead (a
 * handle cannot be opened by its exporter). A host window travels as a /dev/shm segment whose own
 * blob sits in another entry.
 *
 * <pre>
 *   0  int   magic "SCGW"          4  int   version         8  int  kind (1 device/IPC, 2 host, 3 device/fd)
 *  12  int   rank                 16  int   communicator size
 *  20  byte[32] host id (SHA-256 of HostIdentity.hostId())   52  long pid
 *  60  byte[16] device UUID       76  byte[16] PCI bus id (ASCII, zero padded)
 *  92  long  offset of the window in its allocation        100  long size of the window
 * 108  byte[16] secret (also written in the window at SECRET_OFFSET: the opener checks it there; a
 *                 descriptor server hands the descriptor only to a peer that presents it)
 * 124  byte[64] CUDA IPC handle of the allocation (kind 1; zero otherwise)
 * 188  long  raw device address of the window (same-process peers)
 * 196  byte[16] the descriptor server's socket id (kind 3; zero otherwise)
 * 212  long  size of the allocation the peer maps (kind 3; 0 otherwise)
 * 220  zero padding
 * 252  int   CRC32C of bytes 0..251 (a damaged blob would otherwise open a wrong window)
 * 256
 * </pre>
 */
public final class GpuConnectBlob {
    public static final int BYTES = 256;
    public static final int MAGIC = 0x53434757; // "SCGW"
    public static final int VERSION = 3;
    public static final int KIND_DEVICE = 1;
    public static final int KIND_HOST = 2;
    public static final int KIND_DEVICE_FD = 3;
    private static final int PADDING_OFFSET = 220;
    private static final int CRC_OFFSET = BYTES - 4;

    public final int kind;
    public final int rank;
    public final int size;
    public final byte[] hostHash;
    public final long pid;
    public final byte[] deviceUuid;
    public final String pciBusId;
    public final long offset;
    public final long windowBytes;
    public final byte[] secret;
    public final byte[] ipcHandle;
    public final long rawAddress;
    public final byte[] socketId;
    public final long allocationBytes;

    /** A blob of a window not shared through a descriptor server (kinds 1 and 2). */
    public GpuConnectBlob(int kind, int rank, int size, byte[] hostHash, long pid, byte[] deviceUuid, String pciBusId,
                          long offset, long windowBytes, byte[] secret, byte[] ipcHandle, long rawAddress) {
        this(kind, rank, size, hostHash, pid, deviceUuid, pciBusId, offset, windowBytes, secret, ipcHandle, rawAddress,
                new byte[16], 0);
    }

    public GpuConnectBlob(int kind, int rank, int size, byte[] hostHash, long pid, byte[] deviceUuid, String pciBusId,
                          long offset, long windowBytes, byte[] secret, byte[] ipcHandle, long rawAddress,
                          byte[] socketId, long allocationBytes) {
        this.kind = kind;
        this.rank = rank;
        this.size = size;
        this.hostHash = fixed(hostHash, 32, "host id");
        this.pid = pid;
        this.deviceUuid = fixed(deviceUuid, 16, "device UUID");
        this.pciBusId = pciBusId;
        this.offset = offset;
        this.windowBytes = windowBytes;
        this.secret = fixed(secret, 16, "secret");
        this.ipcHandle = fixed(ipcHandle, 64, "IPC handle");
        this.rawAddress = rawAddress;
        this.socketId = fixed(socketId, 16, "socket id");
        this.allocationBytes = allocationBytes;
    }

    private static byte[] fixed(byte[] b, int n, String what) {
        if (b.length != n) {
            throw new IllegalArgumentException(what + " must be " + n + " bytes, not " + b.length);
        }
        return b.clone();
    }

    /** SHA-256 of the host id string: equal on one machine, different across machines. */
    public static byte[] hostHash(String hostId) {
        try {
            return MessageDigest.getInstance("SHA-256").digest(hostId.getBytes(StandardCharsets.UTF_8));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    public byte[] encode() {
        ByteBuffer b = ByteBuffer.allocate(BYTES).order(ByteOrder.BIG_ENDIAN);
        b.putInt(MAGIC).putInt(VERSION).putInt(kind).putInt(rank).putInt(size);
        b.put(hostHash).putLong(pid).put(deviceUuid);
        byte[] bus = Arrays.copyOf(pciBusId.getBytes(StandardCharsets.US_ASCII), 16);
        b.put(bus).putLong(offset).putLong(windowBytes).put(secret).put(ipcHandle).putLong(rawAddress);
        b.put(socketId).putLong(allocationBytes);
        b.putInt(CRC_OFFSET, crc(b.array()));
        return b.array();
    }

    private static int crc(byte[] blob) {
        CRC32C crc = new CRC32C();
        crc.update(blob, 0, CRC_OFFSET);
        return (int) crc.getValue();
    }

    /**
     * Decodes the blob rank {@code expectedRank} sent and refuses one that is damaged, of another
     * version, from another communicator (rank or size differ) or from another machine.
     */
    public static GpuConnectBlob decode(byte[] data, int expectedRank, int expectedSize, byte[] myHostHash) {
        String from = "the GPU connect blob of rank " + expectedRank;
        if (data == null) {
            throw new IllegalArgumentException(from + " is missing: does that rank run sparkccl with GPUs?");
        }
        if (data.length != BYTES) {
            throw new IllegalArgumentException(from + " has " + data.length + " bytes, expected " + BYTES
                    + ": damaged, or sent by another sparkccl version");
        }
        ByteBuffer b = ByteBuffer.wrap(data).order(ByteOrder.BIG_ENDIAN);
        if (b.getInt() != MAGIC) {
            throw new IllegalArgumentException(from + " is not a sparkccl GPU blob (bad magic)");
        }
        int version = b.getInt();
        if (version != VERSION) {
            throw new IllegalArgumentException(from + " has version " + version + ", this rank " + VERSION
                    + ": use the same sparkccl jar on every executor");
        }
        if (b.getInt(CRC_OFFSET) != crc(data)) {
            throw new IllegalArgumentException(from + " is damaged (checksum mismatch): it was altered in transit");
        }
        int kind = b.getInt();
        if (kind != KIND_DEVICE && kind != KIND_HOST && kind != KIND_DEVICE_FD) {
            throw new IllegalArgumentException(from + " is damaged (window kind " + kind + ")");
        }
        int rank = b.getInt();
        int size = b.getInt();
        if (rank != expectedRank || size != expectedSize) {
            throw new IllegalArgumentException(from + " was made for rank " + rank + " of " + size + ", not rank "
                    + expectedRank + " of " + expectedSize + ": it belongs to another communicator");
        }
        byte[] host = new byte[32];
        b.get(host);
        if (!Arrays.equals(host, myHostHash)) {
            throw new IllegalArgumentException(from + " comes from another machine: GPU transports connect ranks of one "
                    + "host only");
        }
        long pid = b.getLong();
        byte[] uuid = new byte[16];
        b.get(uuid);
        byte[] bus = new byte[16];
        b.get(bus);
        int len = 0;
        while (len < 16 && bus[len] != 0) {
            len++;
        }
        long offset = b.getLong();
        long windowBytes = b.getLong();
        byte[] secret = new byte[16];
        b.get(secret);
        byte[] handle = new byte[64];
        b.get(handle);
        long raw = b.getLong();
        byte[] socketId = new byte[16];
        b.get(socketId);
        long allocationBytes = b.getLong();
        if (offset < 0 || windowBytes <= 0) {
            throw new IllegalArgumentException(from + " is damaged (offset " + offset + ", size " + windowBytes + ")");
        }
        boolean byDescriptor = kind == KIND_DEVICE_FD;
        if (byDescriptor != (allocationBytes != 0) || byDescriptor == Arrays.equals(socketId, new byte[16])) {
            throw new IllegalArgumentException(from + " is damaged (window kind " + kind + " with allocation size "
                    + allocationBytes + " and " + (Arrays.equals(socketId, new byte[16]) ? "no" : "a") + " socket id)");
        }
        if (byDescriptor && (allocationBytes < 0 || offset > allocationBytes - windowBytes)) {
            throw new IllegalArgumentException(from + " is damaged (a window of " + windowBytes + " bytes at " + offset
                    + " in an allocation of " + allocationBytes + ")");
        }
        for (int i = PADDING_OFFSET; i < CRC_OFFSET; i++) {
            if (data[i] != 0) {
                throw new IllegalArgumentException(from + " is damaged (byte " + i + " of its padding is not zero)");
            }
        }
        return new GpuConnectBlob(kind, rank, size, host, pid, uuid, new String(bus, 0, len, StandardCharsets.US_ASCII),
                offset, windowBytes, secret, handle, raw, socketId, allocationBytes);
    }

    public String deviceUuidString() {
        return "GPU-" + HexFormat.of().formatHex(deviceUuid);
    }
}
