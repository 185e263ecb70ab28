package org.sparkccl.core.topo;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeSet;

/**
 * What one rank saw of how its GPU reaches the machine's other GPUs, sent in the GPU communicator's
 * init round: for each other GPU (by bus id) the path from this rank's topology (sysfs or
 * {@code SPARKCCL_TOPO_FILE}, NVLink included), the PCIe path beside it (what host staging crosses
 * where NVLink is not used), and CUDA's P2P performance rank for the pair. Every rank then costs the
 * ring's hops from these gathered rows alone ({@link GpuRings}), so ranks agree on the rings even where
 * their processes read sysfs differently or see different GPUs.
 */
public record GpuLinkFacts(String busId, List<Peer> peers) {
    /** The largest number of GPUs a rank describes (the row is sent by every rank). */
    public static final int MAX_PEERS = 64;

    /**
     * How this rank's GPU reaches one other GPU.
     *
     * @param p2pPerformanceRank CUDA's {@code cudaDevP2PAttrPerformanceRank} (lower is better); -1 where
     *                           this process cannot see that GPU or CUDA did not say
     */
    public record Peer(String busId, PathKind kind, long bandwidthMBps, int nvLinks, PathKind pcieKind,
                       long pcieBandwidthMBps, int p2pPerformanceRank) {
    }

    public GpuLinkFacts {
        busId = normalizeBusId(busId);
        peers = List.copyOf(peers);
        if (peers.size() > MAX_PEERS) {
            throw new IllegalArgumentException("a GPU row holds at most " + MAX_PEERS + " peers, got " + peers.size());
        }
    }

    /**
     * This rank's row: a peer for every other GPU of the topology and every GPU CUDA showed this process
     * ({@code p2pRankByBusId}, bus id to performance rank), costed as {@link RingPlanner#path} costs it.
     */
    public static GpuLinkFacts observe(Topology t, String busId, Map<String, Integer> p2pRankByBusId,
                                       boolean costDegradedLinks) {
        String me = normalizeBusId(busId);
        Topology pcieOnly = new Topology(t.devices(), t.hostBridges(), t.numaNodes(), List.of(), t.smpGBps());
        TreeSet<String> others = new TreeSet<>();
        for (PciDevice g : t.gpus()) {
            others.add(g.busId());
        }
        for (String b : p2pRankByBusId.keySet()) {
            others.add(normalizeBusId(b));
        }
        others.remove(me);
        List<Peer> peers = new ArrayList<>();
        for (String other : others) {
            if (peers.size() == MAX_PEERS) {
                break;
            }
            TopoPath p = RingPlanner.path(t, me, other, costDegradedLinks);
            TopoPath pcie = RingPlanner.path(pcieOnly, me, other, costDegradedLinks);
            Integer rank = null;
            for (Map.Entry<String, Integer> e : p2pRankByBusId.entrySet()) {
                rank = normalizeBusId(e.getKey()).equals(other) ? e.getValue() : rank;
            }
            peers.add(new Peer(other, p.kind(), HopCosts.toMBps(p.bandwidthGBps()), p.nvLinks(), pcie.kind(),
                    HopCosts.toMBps(pcie.bandwidthGBps()), rank == null ? -1 : rank));
        }
        return new GpuLinkFacts(me, peers);
    }

    /** The row's entry for a GPU, or null where this rank knows nothing of it. */
    public Peer peer(String otherBusId) {
        String b = normalizeBusId(otherBusId);
        for (Peer p : peers) {
            if (p.busId().equals(b)) {
                return p;
            }
        }
        return null;
    }

    /**
     * Bus ids as sysfs writes them: lower case, a 4-digit domain ({@code 0000:19:00.0}); CUDA writes the
     * same, NVML an 8-digit domain.
     */
    public static String normalizeBusId(String busId) {
        String b = busId.trim().toLowerCase(Locale.ROOT);
        int colon = b.indexOf(':');
        while (colon > 4 && b.charAt(0) == '0') {
            b = b.substring(1);
            colon--;
        }
        return b;
    }

    public byte[] encode() {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (DataOutputStream out = new DataOutputStream(bytes)) {
            out.writeUTF(busId);
            out.writeInt(peers.size());
            for (Peer p : peers) {
                out.writeUTF(p.busId());
                out.writeByte(p.kind().ordinal());
                out.writeLong(p.bandwidthMBps());
                out.writeInt(p.nvLinks());
                out.writeByte(p.pcieKind().ordinal());
                out.writeLong(p.pcieBandwidthMBps());
                out.writeInt(p.p2pPerformanceRank());
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return bytes.toByteArray();
    }

    public static GpuLinkFacts decode(byte[] data, int rank) {
        if (data == null) {
            throw new IllegalArgumentException("rank " + rank + " sent no GPU link facts: use the same sparkccl jar on"
                    + " every executor");
        }
        try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(data))) {
            String busId = in.readUTF();
            int n = in.readInt();
            if (n < 0 || n > MAX_PEERS) {
                throw new IllegalArgumentException("the GPU link facts of rank " + rank + " are damaged (" + n + " peers)");
            }
            List<Peer> peers = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                String b = in.readUTF();
                PathKind kind = kind(in.readUnsignedByte(), rank);
                long bw = in.readLong();
                int nv = in.readInt();
                PathKind pcieKind = kind(in.readUnsignedByte(), rank);
                peers.add(new Peer(b, kind, bw, nv, pcieKind, in.readLong(), in.readInt()));
            }
            if (in.available() != 0) {
                throw new IllegalArgumentException("the GPU link facts of rank " + rank + " are damaged (trailing bytes)");
            }
            return new GpuLinkFacts(busId, peers);
        } catch (IOException e) {
            throw new IllegalArgumentException("the GPU link facts of rank " + rank + " are damaged (truncated)", e);
        }
    }

    private static PathKind kind(int ordinal, int rank) {
        if (ordinal >= PathKind.values().length) {
            throw new IllegalArgumentException("the GPU link facts of rank " + rank + " are damaged (path kind " + ordinal + ")");
        }
        return PathKind.values()[ordinal];
    }
}
