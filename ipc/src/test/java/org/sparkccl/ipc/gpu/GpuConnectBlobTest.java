package org.sparkccl.ipc.gpu;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.sparkccl.core.wire.WireFormatException;

class GpuConnectBlobTest {
    private static final byte[] HOST = GpuConnectBlob.hostHash("host-a/boot-1");
    private static final byte[] UUID = bytes(16, 7);

    private static byte[] bytes(int n, int seed) {
        byte[] b = new byte[n];
        for (int i = 0; i < n; i++) {
            b[i] = (byte) (seed * 31 + i);
        }
        return b;
    }

    private static GpuConnectBlob blob(int rank, int size) {
        return new GpuConnectBlob(GpuConnectBlob.KIND_DEVICE, rank, size, HOST, 1234, UUID, "0000:19:00.0", 4096,
                1 << 20, bytes(16, 3), bytes(64, 5), 0x7f0000001000L);
    }

    @Test
    void roundTripsEveryField() {
        byte[] encoded = blob(2, 4).encode();
        assertEquals(GpuConnectBlob.BYTES, encoded.length);
        GpuConnectBlob b = GpuConnectBlob.decode(encoded, 2, 4, HOST);
        assertEquals(GpuConnectBlob.KIND_DEVICE, b.kind);
        assertEquals(1234, b.pid);
        assertArrayEquals(UUID, b.deviceUuid);
        assertEquals("0000:19:00.0", b.pciBusId);
        assertEquals(4096, b.offset);
        assertEquals(1 << 20, b.windowBytes);
        assertArrayEquals(bytes(16, 3), b.secret);
        assertArrayEquals(bytes(64, 5), b.ipcHandle);
        assertEquals(0x7f0000001000L, b.rawAddress);
        assertEquals(0x53434757, ByteBuffer.wrap(encoded).getInt(), "big-endian magic first");
    }

    private static GpuConnectBlob descriptorBlob(long allocationBytes, byte[] socketId) {
        return new GpuConnectBlob(GpuConnectBlob.KIND_DEVICE_FD, 2, 4, HOST, 1234, UUID, "0000:19:00.0", 0, 1 << 20,
                bytes(16, 3), new byte[64], 0x7f0000001000L, socketId, allocationBytes);
    }

    @Test
    void roundTripsADescriptorWindow() {
        GpuConnectBlob b = GpuConnectBlob.decode(descriptorBlob(2 << 20, bytes(16, 9)).encode(), 2, 4, HOST);
        assertEquals(GpuConnectBlob.KIND_DEVICE_FD, b.kind);
        assertArrayEquals(bytes(16, 9), b.socketId);
        assertEquals(2 << 20, b.allocationBytes);
        assertEquals(1 << 20, b.windowBytes);
        assertArrayEquals(bytes(16, 3), b.secret);
    }

    /** A descriptor window needs its server's name and an allocation that holds it; other kinds have neither. */
    @Test
    void refusesDescriptorFieldsThatDoNotFitTheKind() {
        for (byte[] encoded : new byte[][] {
            descriptorBlob(2 << 20, new byte[16]).encode(),     // no socket id
            descriptorBlob(0, bytes(16, 9)).encode(),           // no allocation
            descriptorBlob((1 << 20) - 1, bytes(16, 9)).encode(), // an allocation smaller than the window
            new GpuConnectBlob(GpuConnectBlob.KIND_DEVICE, 2, 4, HOST, 1234, UUID, "0000:19:00.0", 0, 1 << 20,
                    bytes(16, 3), bytes(64, 5), 1L, bytes(16, 9), 0).encode(), // an IPC window with a socket id
        }) {
            String message = assertThrows(WireFormatException.class, () -> GpuConnectBlob.decode(encoded, 2, 4, HOST))
                    .getMessage();
            assertTrue(message.contains("checksum is right"), message);
        }
    }

    @Test
    void refusesBlobsFromElsewhere() {
        byte[] good = blob(2, 4).encode();
        String other = assertThrows(WireFormatException.class,
                () -> GpuConnectBlob.decode(good, 2, 4, GpuConnectBlob.hostHash("host-b/boot-9"))).getMessage();
        assertTrue(other.contains("another host"), other);
        String comm = assertThrows(WireFormatException.class, () -> GpuConnectBlob.decode(good, 2, 8, HOST))
                .getMessage();
        assertTrue(comm.contains("another communicator"), comm);
        byte[] version = good.clone();
        version[7] = 9;
        String v = assertThrows(WireFormatException.class, () -> GpuConnectBlob.decode(version, 2, 4, HOST))
                .getMessage();
        assertTrue(v.contains("version 9"), v);
        byte[] magic = good.clone();
        magic[0] = 0;
        assertThrows(WireFormatException.class, () -> GpuConnectBlob.decode(magic, 2, 4, HOST));
        assertThrows(WireFormatException.class,
                () -> GpuConnectBlob.decode(java.util.Arrays.copyOf(good, 100), 2, 4, HOST));
        assertThrows(WireFormatException.class, () -> GpuConnectBlob.decode(null, 2, 4, HOST));
    }

    @Test
    void p2pLinksNeedBothEndsWillingAndAble() {
        byte[] u0 = bytes(16, 1);
        byte[] u1 = bytes(16, 2);
        GpuRankInfo a = new GpuRankInfo(0, u0, "0000:19:00.0", false, List.of(u1));
        GpuRankInfo b = new GpuRankInfo(1, u1, "0000:3b:00.0", false, List.of(u0));
        GpuRankInfo lonely = new GpuRankInfo(1, u1, "0000:3b:00.0", false, List.of());
        GpuRankInfo disabled = new GpuRankInfo(1, u1, "0000:3b:00.0", true, List.of(u0));
        assertTrue(GpuRankInfo.p2pLink(a, b));
        assertFalse(GpuRankInfo.p2pLink(a, lonely), "b cannot reach a");
        assertFalse(GpuRankInfo.p2pLink(a, disabled));
        assertTrue(GpuRankInfo.p2pLink(a, new GpuRankInfo(2, u0, "0000:19:00.0", false, List.of())), "same GPU");
        GpuRankInfo back = GpuRankInfo.decode(a.encode(), 0);
        assertTrue(back.canReach(u1));
        assertEquals("0000:19:00.0", back.pciBusId);
    }

    /** LL128 only where a 128-byte store arrives whole: NVLink both ways, or one GPU; never PCIe or staged. */
    @Test
    void ll128LinksAreNvLinkOrOneGpu() {
        byte[] u0 = bytes(16, 1);
        byte[] u1 = bytes(16, 2);
        byte[] u2 = bytes(16, 3);
        GpuRankInfo a = new GpuRankInfo(0, u0, "0000:19:00.0", false, List.of(u2, u1), 0b10);
        GpuRankInfo b = new GpuRankInfo(1, u1, "0000:3b:00.0", false, List.of(u0), 0b1);
        GpuRankInfo bOverPcie = new GpuRankInfo(1, u1, "0000:3b:00.0", false, List.of(u0));
        GpuRankInfo c = new GpuRankInfo(2, u2, "0000:5d:00.0", false, List.of(u0, u1), 0b10);
        assertTrue(GpuRankInfo.ll128Link(a, b) && GpuRankInfo.ll128Link(b, a), "NVLink both ways");
        assertTrue(GpuRankInfo.p2pLink(a, bOverPcie));
        assertFalse(GpuRankInfo.ll128Link(a, bOverPcie), "P2P over PCIe");
        assertFalse(GpuRankInfo.ll128Link(a, c), "a reaches c over PCIe only");
        assertTrue(GpuRankInfo.ll128Link(a, new GpuRankInfo(3, u0, "0000:19:00.0", false, List.of())), "one GPU");
        assertFalse(GpuRankInfo.ll128Link(a, new GpuRankInfo(3, u0, "0000:19:00.0", true, List.of())),
                "one GPU, but P2P off: the host-staged path");
        GpuRankInfo back = GpuRankInfo.decode(a.encode(), 0);
        assertTrue(back.nvLinkTo(u1));
        assertFalse(back.nvLinkTo(u2));
        assertTrue(GpuRankInfo.ll128Link(back, GpuRankInfo.decode(b.encode(), 1)));
    }
}
