package org.sparkccl.core.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.sparkccl.core.log.CclLog;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.transport.ExposedRegion;
import org.sparkccl.core.transport.HostIdentity;
import org.sparkccl.core.transport.LocalMemoryTransport;
import org.sparkccl.core.transport.RankInfo;
import org.sparkccl.core.wire.WireFormatException;

/** Connect blobs that are foreign, of another version, another host, truncated or damaged are refused. */
class ShmConnectBlobTest {
    private final ShmTransport transport = new ShmTransport(Params.defaults());

    private static byte[] validBlob() {
        return new ShmConnectBlob(HostIdentity.pid(), 4096, ShmConnectBlob.hostDigest(HostIdentity.hostId()),
                ShmSegmentHeader.newSecret(), ShmSegmentName.newName(HostIdentity.pid())).encode();
    }

    private String refusal(byte[] blob) {
        return assertThrows(WireFormatException.class, () -> transport.open(blob, null)).getMessage();
    }

    @Test
    void roundTrips() {
        byte[] bytes = validBlob();
        assertEquals(ShmConnectBlob.SIZE, bytes.length);
        ShmConnectBlob blob = ShmConnectBlob.decode(bytes, "test");
        assertEquals(HostIdentity.pid(), blob.pid);
        assertEquals(4096, blob.bytes);
        assertTrue(blob.sameHostAs(ShmConnectBlob.hostDigest(HostIdentity.hostId())));
        assertEquals(ShmSegmentHeader.SECRET_BYTES, blob.secret.length);
    }

    @Test
    void foreignMagicIsRefused() {
        try (LocalMemoryTransport local = new LocalMemoryTransport()) {
            var region = local.expose(64, "local");
            assertTrue(refusal(region.connectBlob()).contains("is not a sparkccl SHM connect blob"));
            region.close();
        }
    }

    @Test
    void otherVersionIsRefused() {
        byte[] blob = validBlob();
        int other = ShmConnectBlob.FORMAT.version() + 1;
        ByteBuffer.wrap(blob).putInt(4, other);
        String message = refusal(blob);
        assertTrue(message.contains("version " + other), message);
        assertTrue(message.contains("same sparkccl jar"), message);
    }

    @Test
    void truncatedAndDamagedBlobsAreRefused() {
        byte[] blob = validBlob();
        assertTrue(refusal(Arrays.copyOf(blob, 100)).contains("truncated"));
        assertTrue(refusal(Arrays.copyOf(blob, 4)).contains("truncated"));
        byte[] flipped = blob.clone();
        flipped[70] ^= 1;
        assertTrue(refusal(flipped).contains("corrupted"));
    }

    @Test
    void aBlobMayNotNameAFileOutsideTheScheme() {
        byte[] blob = new ShmConnectBlob(HostIdentity.pid(), 4096, ShmConnectBlob.hostDigest(HostIdentity.hostId()),
                ShmSegmentHeader.newSecret(), "../../etc/passwd").encode();
        assertTrue(refusal(blob).contains("not a sparkccl segment"));
    }

    @Test
    void blobFromAnotherHostIsRefused(@TempDir Path dir) {
        CclLog log = new CclLog(0, Params.defaults());
        try (ShmTransport elsewhere = new ShmTransport(Params.defaults(), log, dir, null, "other-machine/boot-id")) {
            ExposedRegion region = elsewhere.expose(4096, "remote");
            assertTrue(refusal(region.connectBlob()).contains("another host"));
            region.close();
        }
    }

    @Test
    void blobWhosePidDisagreesWithItsRankIsRefused() {
        RankInfo owner = new RankInfo(1, 2, HostIdentity.hostId(), HostIdentity.pid() + 1, HostIdentity.shmDevice(),
                Map.of());
        String message = assertThrows(WireFormatException.class, () -> transport.open(validBlob(), owner))
                .getMessage();
        assertTrue(message.contains("mixed up"), message);
    }
}
