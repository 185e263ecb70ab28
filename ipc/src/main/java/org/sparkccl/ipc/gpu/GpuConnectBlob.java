package org.sparkccl.ipc.gpu;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;
import java.util.HexFormat;
import org.sparkccl.core.wire.WireFormat;

/**
 * What a peer needs to open one of this rank's GPU windows: a sealed {@link WireFormat} message of
 * fixed size ({@link #BYTES}). A device window is either CUDA virtual memory shared as a file
 * descriptor (kind 3: the peer fetches the descriptor from the owner's descriptor server, named by
 * the socket id, presenting the secret, and maps the whole allocation) or, where that is not
 * available, the CUDA IPC handle of its allocation's base plus an offset (kind 1); same-process
 * peers use the raw pointer instead (a handle cannot be opened by its exporter). A host window
 * travels as a /dev/shm segment whose own blob sits in another entry. The body, big-endian:
 *
 * <pre>
 *   0  int   kind (1 device/IPC, 2 host, 3 device/fd)     4  int   rank     8  int  communicator size
 *  12  byte[32] host id (SHA-256 of HostIdentity.hostId())   44  long pid
 *  52  byte[16] device UUID       68  byte[16] PCI bus id (ASCII, zero padded)
 *  84  long  offset of the window in its allocation         92  long size of the window
 * 100  byte[16] secret (also written in the window at SECRET_OFFSET: the opener checks it there; a
 *                 descriptor server hands the descriptor only to a peer that presents it)
 * 116  byte[64] CUDA IPC handle of the allocation (kind 1; zero otherwise)
 * 180  long  raw device address of the window (same-process peers)
 * 188  byte[16] the descriptor server's socket id (kind 3; zero otherwise)
 * 204  long  size of the allocation the peer maps (kind 3; 0 otherwise)
 * 212  zero padding to 240
 * </pre>
 *
 * The envelope's CRC32C matters here: a damaged blob would otherwise open a wrong window.
 */
public final class GpuConnectBlob {
    public static final int BYTES = 256;
    /** Version 4: sealed (a body length in front, the body 4 bytes later than in version 3). */
    static final WireFormat FORMAT = WireFormat.sealed("GPU connect blob", 0x53434757, 4); // "SCGW"
    public static final int KIND_DEVICE = 1;
    public static final int KIND_HOST = 2;
    public static final int KIND_DEVICE_FD = 3;
    private static final int BODY_BYTES = BYTES - WireFormat.ENVELOPE_BYTES;
    private static final int PADDING_OFFSET = 212;

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
        ByteBuffer b = ByteBuffer.allocate(BODY_BYTES);
        b.putInt(kind).putInt(rank).putInt(size);
        b.put(hostHash).putLong(pid).put(deviceUuid);
        byte[] bus = Arrays.copyOf(pciBusId.getBytes(StandardCharsets.US_ASCII), 16);
        b.put(bus).putLong(offset).putLong(windowBytes).put(secret).put(ipcHandle).putLong(rawAddress);
        b.put(socketId).putLong(allocationBytes);
        return FORMAT.seal(b.array());
    }

    /**
     * Decodes the blob rank {@code expectedRank} sent and refuses one that is damaged, of another
     * version, from another communicator (rank or size differ) or from another machine.
     */
    public static GpuConnectBlob decode(byte[] data, int expectedRank, int expectedSize, byte[] myHostHash) {
        String from = "rank " + expectedRank;
        ByteBuffer b = FORMAT.open(data, BODY_BYTES, from);
        int kind = b.getInt();
        if (kind != KIND_DEVICE && kind != KIND_HOST && kind != KIND_DEVICE_FD) {
            throw FORMAT.malformed(from, "window kind " + kind);
        }
        int rank = b.getInt();
        int size = b.getInt();
        if (rank != expectedRank || size != expectedSize) {
            throw FORMAT.refused(from, "it was made for rank " + rank + " of " + size + ", not rank " + expectedRank
                    + " of " + expectedSize, "it belongs to another communicator");
        }
        byte[] host = new byte[32];
        b.get(host);
        if (!Arrays.equals(host, myHostHash)) {
            throw FORMAT.refused(from, "it comes from another host", "GPU transports connect ranks of one host only");
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
            throw FORMAT.malformed(from, "window offset " + offset + ", size " + windowBytes);
        }
        boolean byDescriptor = kind == KIND_DEVICE_FD;
        if (byDescriptor != (allocationBytes != 0) || byDescriptor == Arrays.equals(socketId, new byte[16])) {
            throw FORMAT.malformed(from, "window kind " + kind + " with allocation size " + allocationBytes + " and "
                    + (Arrays.equals(socketId, new byte[16]) ? "no" : "a") + " socket id");
        }
        if (byDescriptor && (allocationBytes < 0 || offset > allocationBytes - windowBytes)) {
            throw FORMAT.malformed(from, "a window of " + windowBytes + " bytes at " + offset + " in an allocation of "
                    + allocationBytes);
        }
        for (int i = PADDING_OFFSET; i < BODY_BYTES; i++) {
            if (b.get(i) != 0) {
                throw FORMAT.malformed(from, "byte " + i + " of its body, in the padding, is not zero");
            }
        }
        return new GpuConnectBlob(kind, rank, size, host, pid, uuid, new String(bus, 0, len, StandardCharsets.US_ASCII),
                offset, windowBytes, secret, handle, raw, socketId, allocationBytes);
    }

    public String deviceUuidString() {
        return "GPU-" + HexFormat.of().formatHex(deviceUuid);
    }
}
