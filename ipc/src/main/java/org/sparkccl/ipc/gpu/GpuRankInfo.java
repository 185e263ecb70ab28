package org.sparkccl.ipc.gpu;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.sparkccl.core.wire.WireFormat;

/**
 * A rank's GPU as its peers need to know it: UUID, PCI bus id, whether it refuses P2P, the UUIDs of
 * the GPUs it can reach peer-to-peer ({@code cuDeviceCanAccessPeer}, seen from its own process) and
 * which of those it reaches over NVLink ({@link org.sparkccl.ipc.cuda.CudaDevice#nvLinkTo}).
 * A fixed-size sealed {@link WireFormat} message whose body, big-endian, is: flags, ordinal, UUID,
 * bus id, count, 16 UUIDs, then a bit mask over those UUIDs: bit i set when the i-th is over NVLink.
 * Every rank decides each link's transport (and whether LL128 may run on it) from these alone, so both
 * ends decide alike.
 */
public final class GpuRankInfo {
    public static final int MAX_PEERS = 16;
    private static final int BODY_BYTES = 4 + 4 + 16 + 16 + 4 + MAX_PEERS * 16 + 4;
    public static final int BYTES = WireFormat.ENVELOPE_BYTES + BODY_BYTES;
    /** 2: the NVLink mask; 3: sealed (body length and CRC32C). */
    static final WireFormat FORMAT = WireFormat.sealed("GPU description", 0x53434744, 3); // "SCGD"
    static final int FLAG_P2P_DISABLED = 1;

    public final int ordinal;
    public final byte[] uuid;
    public final String pciBusId;
    public final boolean p2pDisabled;
    public final List<byte[]> reachable;
    /** Bit i: {@code reachable.get(i)} is reached over NVLink. */
    private final int nvLinkMask;

    /** A GPU that knows of no NVLink to its peers. */
    public GpuRankInfo(int ordinal, byte[] uuid, String pciBusId, boolean p2pDisabled, List<byte[]> reachable) {
        this(ordinal, uuid, pciBusId, p2pDisabled, reachable, 0);
    }

    /** @param nvLinkMask bit i set where {@code reachable.get(i)} is reached over NVLink */
    public GpuRankInfo(int ordinal, byte[] uuid, String pciBusId, boolean p2pDisabled, List<byte[]> reachable,
                       int nvLinkMask) {
        if (reachable.size() > MAX_PEERS) {
            reachable = reachable.subList(0, MAX_PEERS);
        }
        this.ordinal = ordinal;
        this.uuid = uuid.clone();
        this.pciBusId = pciBusId;
        this.p2pDisabled = p2pDisabled;
        this.reachable = new ArrayList<>(reachable);
        this.nvLinkMask = nvLinkMask & ((1 << reachable.size()) - 1);
    }

    /** True when both ranks run on the same physical GPU (same UUID, whatever each process numbers it). */
    public boolean sameGpu(GpuRankInfo other) {
        return Arrays.equals(uuid, other.uuid);
    }

    public boolean canReach(byte[] otherUuid) {
        if (Arrays.equals(uuid, otherUuid)) {
            return true;
        }
        for (byte[] u : reachable) {
            if (Arrays.equals(u, otherUuid)) {
                return true;
            }
        }
        return false;
    }

    /** True when {@code a} sends to {@code b} over P2P: both allow it and each reaches the other's GPU. */
    public static boolean p2pLink(GpuRankInfo a, GpuRankInfo b) {
        return !a.p2pDisabled && !b.p2pDisabled && a.canReach(b.uuid) && b.canReach(a.uuid);
    }

    /** True when this GPU reaches the GPU {@code otherUuid} over NVLink, as its own process saw it. */
    public boolean nvLinkTo(byte[] otherUuid) {
        for (int i = 0; i < reachable.size(); i++) {
            if ((nvLinkMask & (1 << i)) != 0 && Arrays.equals(reachable.get(i), otherUuid)) {
                return true;
            }
        }
        return false;
    }

    /**
     * True when LL128 may run from {@code a} to {@code b}: the hop is P2P and stays within one GPU or
     * crosses NVLink both ways, where a warp's 128-byte store reaches the reader whole. Over PCIe or
     * through host memory it may arrive in pieces, and a reader could take a line's flag with stale data.
     */
    public static boolean ll128Link(GpuRankInfo a, GpuRankInfo b) {
        return p2pLink(a, b) && (a.sameGpu(b) || a.nvLinkTo(b.uuid) && b.nvLinkTo(a.uuid));
    }

    public byte[] encode() {
        ByteBuffer b = ByteBuffer.allocate(BODY_BYTES);
        b.putInt(p2pDisabled ? FLAG_P2P_DISABLED : 0).putInt(ordinal).put(uuid);
        b.put(Arrays.copyOf(pciBusId.getBytes(java.nio.charset.StandardCharsets.US_ASCII), 16));
        b.putInt(reachable.size());
        for (byte[] u : reachable) {
            b.put(u);
        }
        b.putInt(BODY_BYTES - 4, nvLinkMask);
        return FORMAT.seal(b.array());
    }

    public static GpuRankInfo decode(byte[] data, int rank) {
        String from = "rank " + rank;
        if (data == null) {
            throw FORMAT.refused(from, "it is missing", "every rank of a GPU communicator must be built with"
                    + " GpuCommunicators.create");
        }
        ByteBuffer b = FORMAT.open(data, BODY_BYTES, from);
        int flags = b.getInt();
        int ordinal = b.getInt();
        byte[] uuid = new byte[16];
        b.get(uuid);
        byte[] bus = new byte[16];
        b.get(bus);
        int len = 0;
        while (len < 16 && bus[len] != 0) {
            len++;
        }
        int n = b.getInt();
        if (n < 0 || n > MAX_PEERS) {
            throw FORMAT.malformed(from, n + " reachable GPUs, at most " + MAX_PEERS + " expected");
        }
        List<byte[]> reach = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            byte[] u = new byte[16];
            b.get(u);
            reach.add(u);
        }
        int nvLinks = b.getInt(BODY_BYTES - 4);
        return new GpuRankInfo(ordinal, uuid, new String(bus, 0, len, java.nio.charset.StandardCharsets.US_ASCII),
                (flags & FLAG_P2P_DISABLED) != 0, reach, nvLinks);
    }
}
