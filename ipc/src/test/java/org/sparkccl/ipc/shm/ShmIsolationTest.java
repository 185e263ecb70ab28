package org.sparkccl.ipc.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.transport.ExposedRegion;
import org.sparkccl.core.transport.HostIdentity;
import org.sparkccl.core.transport.RankInfo;

/**
 * What keeps jobs on one machine apart: segments only their owner can open, names nobody can
 * predict, and blobs that do not belong to the rank they claim to come from refused.
 * (Two jobs running at once: {@code org.sparkccl.ipc.reliability.ConcurrentJobsTest}.)
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
            String message = assertThrows(IllegalArgumentException.class,
                    () -> transport.open(region.connectBlob(), peer)).getMessage();
            assertTrue(message.contains("names pid " + HostIdentity.pid()) && message.contains("mixed up"), message);
            assertEquals(4096, transport.outstandingBytes(), "only the exposed region is open");
        }
    }
}
