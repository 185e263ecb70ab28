package org.sparkccl.core.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import org.agrona.concurrent.AtomicBuffer;
import org.junit.jupiter.api.Test;
import org.sparkccl.core.CclException;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.transport.ExposedRegion;
import org.sparkccl.core.transport.HostIdentity;
import org.sparkccl.core.transport.RankInfo;
import org.sparkccl.core.transport.SharedRegion;

/** SHM between threads of one JVM, naming, permissions, unlinking and accounting. */
class ShmTransportTest {
    private static final Pattern NAME = Pattern.compile("sparkccl-" + HostIdentity.pid() + "-([0-9a-f]{32})");

    @Test
    void segmentIsPrivateZeroFilledAndUnguessablyNamed() throws Exception {
        try (ShmTransport transport = new ShmTransport(Params.defaults())) {
            ExposedRegion a = transport.expose(10_000, "a");
            ExposedRegion b = transport.expose(10_000, "b");
            String nameA = ((ShmRegion) a).segmentName();
            String nameB = ((ShmRegion) b).segmentName();
            var ma = NAME.matcher(nameA);
            var mb = NAME.matcher(nameB);
            assertTrue(ma.matches(), nameA);
            assertTrue(mb.matches(), nameB);
            assertNotEquals(ma.group(1), mb.group(1), "random parts differ");

            Path file = ShmTestSupport.DEV_SHM.resolve(nameA);
            assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(file)));
            assertEquals(ShmSegmentHeader.BYTES + 10_000, Files.size(file), "the header page, then the region");
            assertEquals(10_000, a.size());
            for (int i = 0; i < 10_000; i++) {
                assertEquals(0, a.buffer().getByte(i), "zero-filled at " + i);
            }
            assertEquals(20_000, transport.outstandingBytes());
            a.close();
            b.close();
            assertEquals(0, transport.outstandingBytes());
            assertEquals(0, ShmTestSupport.segmentsOf(HostIdentity.pid()).size(), "close removed the files");
        }
    }

    @Test
    void threadsOfOneJvmShareTheRegionBeforeAndAfterUnlink() throws Exception {
        long mappedBefore = ShmTransport.mappedBytesInJvm();
        try (ShmTransport owner = new ShmTransport(Params.defaults());
             ShmTransport peer = new ShmTransport(Params.defaults());
             ShmTransport late = new ShmTransport(Params.defaults())) {
            ExposedRegion region = owner.expose(1 << 20, "rank 0 receive buffer");
            byte[] blob = region.connectBlob();
            RankInfo ownerInfo = RankInfo.local(0, 2);

            SharedRegion view = CompletableFuture.supplyAsync(() -> peer.open(blob, ownerInfo)).get(60, TimeUnit.SECONDS);
            assertEquals(1 << 20, peer.outstandingBytes());
            assertEquals(mappedBefore + (1 << 20), ShmTransport.mappedBytesInJvm(), "same-process peers share one mapping");
            pingPong(region.buffer(), view.buffer());

            region.unlinkName();
            assertFalse(Files.exists(ShmTestSupport.DEV_SHM.resolve(((ShmRegion) region).segmentName())));
            // A rank of this JVM can still open it: it gets the owner's mapping, not the file.
            SharedRegion lateView = late.open(blob, ownerInfo);
            pingPong(lateView.buffer(), region.buffer());

            // The owner closing first must not unmap under its peers.
            region.close();
            assertEquals(0, owner.outstandingBytes());
            pingPong(view.buffer(), lateView.buffer());
            view.close();
            lateView.close();
            assertEquals(0, peer.outstandingBytes());
            assertEquals(0, late.outstandingBytes());
            assertEquals(mappedBefore, ShmTransport.mappedBytesInJvm());

            CclException gone = assertThrows(CclException.class, () -> late.open(blob, ownerInfo));
            assertTrue(gone.getMessage().contains("is gone"), gone.getMessage());
        }
        assertEquals(0, ShmTestSupport.segmentsOf(HostIdentity.pid()).size());
    }

    /** One thread writes random data and publishes a flag; another acquires the flag and checks the data. */
    private static void pingPong(AtomicBuffer writerSide, AtomicBuffer readerSide) throws Exception {
        long seed = new SplittableRandom().nextLong();
        int flag = 0;
        long token = seed | 1;
        readerSide.putLongRelease(flag, 0);
        CompletableFuture<Void> reader = CompletableFuture.runAsync(() -> {
            assertEquals(token, ShmChild.awaitNonZero(readerSide, flag));
            SplittableRandom expected = new SplittableRandom(seed);
            for (int i = 64; i < 64 + 8 * 1000; i += 8) {
                assertEquals(expected.nextLong(), readerSide.getLong(i), "data at " + i);
            }
        });
        SplittableRandom data = new SplittableRandom(seed);
        for (int i = 64; i < 64 + 8 * 1000; i += 8) {
            writerSide.putLong(i, data.nextLong());
        }
        writerSide.putLongRelease(flag, token);
        reader.get(60, TimeUnit.SECONDS);
    }

    @Test
    void closingTheTransportClosesWhatIsLeftOpen() {
        ShmTransport transport = new ShmTransport(Params.defaults());
        ExposedRegion region = transport.expose(4096, "leaked");
        transport.open(region.connectBlob(), null);
        assertEquals(8192, transport.outstandingBytes());
        transport.close();
        assertEquals(0, transport.outstandingBytes());
        assertFalse(Files.exists(ShmTestSupport.DEV_SHM.resolve(((ShmRegion) region).segmentName())));
    }

    @Test
    void sizesOutsideOneByteToTwoGibAreRefused() {
        try (ShmTransport transport = new ShmTransport(Params.defaults())) {
            assertThrows(IllegalArgumentException.class, () -> transport.expose(0, "empty"));
            assertThrows(IllegalArgumentException.class, () -> transport.expose(1L << 31, "too big"));
            assertEquals(0, transport.outstandingBytes());
        }
    }

    @Test
    void disabledTransportSaysWhy() {
        Params off = Params.defaults().withOverrides(Map.of("SPARKCCL_SHM_DISABLE", "1"));
        try (ShmTransport transport = new ShmTransport(off)) {
            assertTrue(transport.unavailableReason().contains("SPARKCCL_SHM_DISABLE"));
            RankInfo me = RankInfo.local(0, 2);
            assertNotNull(transport.cannotConnectReason(me, RankInfo.local(1, 2)));
            CclException e = assertThrows(CclException.class, () -> transport.expose(4096, "x"));
            assertTrue(e.getMessage().contains("SPARKCCL_SHM_DISABLE"), e.getMessage());
        }
    }

    @Test
    void connectsOnlyRanksOfOneHostAndOneDevShm() {
        try (ShmTransport transport = new ShmTransport(Params.defaults())) {
            assertNull(transport.unavailableReason());
            RankInfo me = RankInfo.local(0, 3);
            RankInfo sameHost = new RankInfo(1, 3, me.hostId(), 4242, me.shmDevice(), Map.of());
            RankInfo otherHost = new RankInfo(1, 3, "elsewhere/" + me.hostId(), 4242, me.shmDevice(), Map.of());
            RankInfo otherShm = new RankInfo(2, 3, me.hostId(), 4242, me.shmDevice() + 1, Map.of());
            assertNull(transport.cannotConnectReason(me, sameHost));
            assertTrue(transport.cannotConnectReason(me, otherHost).contains("another host"));
            assertTrue(transport.cannotConnectReason(me, otherShm).contains("another /dev/shm"));
        }
    }
}
