package org.sparkccl.core.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.sparkccl.core.CclException;
import org.sparkccl.core.wire.WireFormatException;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.transport.ExposedRegion;
import org.sparkccl.core.transport.HostIdentity;
import org.sparkccl.core.transport.RankInfo;
import org.sparkccl.core.transport.SharedRegion;

/**
 * What keeps jobs on one machine apart: segments only their owner can open, names nobody can
 * predict, blobs that do not belong to the rank they claim to come from refused, and blobs whose
 * secret is not the one in the segment they name refused.
 * (Two jobs running at once: {@code org.sparkccl.tools.reliability.ConcurrentJobsTest}.)
 */
class ShmIsolationTest {

    @Test
    void segmentsInDevShmAreOwnerOnlyAndOwnedByThisUser() throws IOException {
        try (ShmTransport transport = new ShmTransport(Params.defaults());
             ExposedRegion region = transport.expose(1 << 16, "isolation test")) {
            ShmConnectBlob blob = ShmConnectBlob.decode(region.connectBlob(), "test");
            Path file = ShmTransport.DEFAULT_DIRECTORY.resolve(blob.name);
            assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(file)));
            assertEquals(System.getProperty("user.name"), Files.getOwner(file).getName());
        }
    }

    /** 10,000 names: all different, and every hex digit of the random part takes most of its 16 values. */
    @Test
    void namesCannotBeGuessed() {
        int n = 10_000;
        Set<String> names = new HashSet<>();
        @SuppressWarnings("unchecked")
        Set<Character>[] seen = new Set[32];
        for (int i = 0; i < seen.length; i++) {
            seen[i] = new HashSet<>();
        }
        String prefix = ShmSegmentName.PREFIX + HostIdentity.pid() + "-";
        for (int i = 0; i < n; i++) {
            String name = ShmSegmentName.newName(HostIdentity.pid());
            assertTrue(names.add(name), "repeated: " + name);
            assertEquals(HostIdentity.pid(), ShmSegmentName.ownerPid(name));
            String random = name.substring(prefix.length());
            assertEquals(32, random.length(), name);
            for (int d = 0; d < 32; d++) {
                seen[d].add(random.charAt(d));
            }
        }
        for (int d = 0; d < 32; d++) {
            assertEquals(16, seen[d].size(), "hex digit " + d + " of the random part took only " + seen[d]);
        }
    }

    /**
     * A blob of another job's process handed over as if it came from a rank of this communicator:
     * the pid it names is not that rank's, so it is refused before anything is opened.
     */
    @Test
    void aBlobOfAnotherJobIsRefused() {
        try (ShmTransport transport = new ShmTransport(Params.defaults());
             ExposedRegion region = transport.expose(4096, "the other job's buffers")) {
            long pretendedPid = HostIdentity.pid() + 1;
            RankInfo peer = new RankInfo(1, 2, HostIdentity.hostId(), pretendedPid, HostIdentity.shmDevice(), Map.of());
            String message = assertThrows(WireFormatException.class,
                    () -> transport.open(region.connectBlob(), peer)).getMessage();
            assertTrue(message.contains("names pid " + HostIdentity.pid()) && message.contains("mixed up"), message);
            assertEquals(4096, transport.outstandingBytes(), "only the exposed region is open");
        }
    }

    /**
     * Another process's segment (another job's; here a child JVM's) named by a blob that is right in
     * every field but the secret, as a blob made for another communicator or an older file of that
     * name would be: refused before anything is mapped. The blob with the right secret opens it.
     */
    @Test
    void aBlobWithAnotherSecretIsRefusedBeforeAnythingIsMapped() throws Exception {
        try (ChildJvm other = new ChildJvm("hold", "65536");
             ShmTransport transport = new ShmTransport(Params.defaults())) {
            byte[] realBlob = HexFormat.of().parseHex(other.await("EXPOSED").split(" ")[2]);
            ShmConnectBlob real = ShmConnectBlob.decode(realBlob, "test");
            byte[] wrongSecret = new ShmConnectBlob(real.pid, real.bytes, real.hostDigest, ShmSegmentHeader.newSecret(),
                    real.name).encode();
            RankInfo owner = new RankInfo(1, 2, HostIdentity.hostId(), other.pid(), HostIdentity.shmDevice(), Map.of());
            long mappedBefore = ShmTransport.mappedBytesInJvm();
            try {
                String message = assertThrows(CclException.class, () -> transport.open(wrongSecret, owner)).getMessage();
                assertTrue(message.contains("does not hold the secret that its connect blob names")
                        && message.contains(real.name) && message.contains("nothing was mapped"), message);
                assertEquals(0, transport.outstandingBytes());
                assertEquals(mappedBefore, ShmTransport.mappedBytesInJvm(), "nothing was mapped");

                try (SharedRegion region = transport.open(realBlob, owner)) {
                    assertEquals(65536, region.size());
                }
            } finally {
                other.kill();
                transport.cleanUpAfter(other.pid());
            }
            assertEquals(0, ShmTestSupport.segmentsOf(other.pid()).size(), "the child's segment was removed");
        }
    }

    /** The same between two communicators of one process: a blob naming one's segment with the other's secret. */
    @Test
    void aBlobWithTheSecretOfAnotherSegmentOfThisProcessIsRefused() {
        try (ShmTransport first = new ShmTransport(Params.defaults());
             ShmTransport second = new ShmTransport(Params.defaults());
             ExposedRegion mine = first.expose(4096, "one communicator's segment");
             ExposedRegion theirs = second.expose(4096, "another communicator's segment")) {
            ShmConnectBlob a = ShmConnectBlob.decode(mine.connectBlob(), "test");
            ShmConnectBlob b = ShmConnectBlob.decode(theirs.connectBlob(), "test");
            byte[] mixed = new ShmConnectBlob(a.pid, a.bytes, a.hostDigest, b.secret, a.name).encode();
            String message = assertThrows(CclException.class, () -> second.open(mixed, null)).getMessage();
            assertTrue(message.contains("does not hold the secret that its connect blob names"), message);
            assertEquals(4096, second.outstandingBytes(), "only its own exposed region is open");
        }
    }
}
