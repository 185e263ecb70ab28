package org.sparkccl.core.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.util.HexFormat;
import java.util.SplittableRandom;
import org.agrona.concurrent.AtomicBuffer;
import org.junit.jupiter.api.Test;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.transport.ExposedRegion;
import org.sparkccl.core.transport.HostIdentity;
import org.sparkccl.core.transport.SharedRegion;

/** Two processes (this JVM and a forked one) see each other's writes; killed processes get cleaned up after. */
class ShmCrossProcessTest {

    @Test
    void parentAndChildSeeEachOthersWrites() throws Exception {
        long pid = HostIdentity.pid();
        try (ShmTransport transport = new ShmTransport(Params.defaults())) {
            // An odd size, not a multiple of the page size.
            ExposedRegion p = transport.expose(ShmChild.DATA + 8 * 4099 + 24, "parent region");
            AtomicBuffer pb = p.buffer();
            SplittableRandom random = new SplittableRandom();
            for (int i = ShmChild.DATA; i + 8 <= pb.capacity(); i += 8) {
                pb.putLong(i, random.nextLong());
            }
            long checksum = ShmChild.checksum(pb, ShmChild.DATA);
            String pName = ((ShmRegion) p).segmentName();

            try (ChildJvm child = new ChildJvm("peer", HexFormat.of().formatHex(p.connectBlob()),
                    Long.toString(checksum))) {
                byte[] childBlob = HexFormat.of().parseHex(child.await("READY"));
                SharedRegion c = transport.open(childBlob, null);
                assertEquals(1, ShmTestSupport.segmentsOf(child.pid()).size(), "child's segment is in /dev/shm");

                // The child has mapped P: the name can go, the memory stays shared.
                p.unlinkName();
                assertFalse(Files.exists(ShmTestSupport.DEV_SHM.resolve(pName)), "unlinkName removed the file");

                long token = random.nextLong() | 1;
                pb.putLongRelease(ShmChild.TOKEN, token);
                AtomicBuffer cb = c.buffer();
                assertEquals(token + 1, ShmChild.awaitNonZero(cb, ShmChild.TOKEN), "child's answer in its region");
                for (int i = 0; i < ShmChild.PATTERN_LONGS; i++) {
                    assertEquals(token * (i + 1), cb.getLong(ShmChild.DATA + i * 8), "child's pattern at " + i);
                }
                assertEquals(token ^ 0x5555_5555_5555_5555L, pb.getLongAcquire(ShmChild.ECHO),
                        "child's write into the parent's region");

                c.close();
                pb.putLongRelease(ShmChild.BYE, 1);
                child.await("DONE");
                assertEquals(0, child.waitForExit(), child::transcript);
                assertEquals(0, ShmTestSupport.segmentsOf(child.pid()).size(), "child left nothing in /dev/shm");
            }
            p.close();
            assertEquals(0, transport.outstandingBytes());
            assertEquals(0, ShmTestSupport.segmentsOf(pid).size(), "parent left nothing in /dev/shm");
        }
    }

    @Test
    void aProcessThatExitsWithoutClosingLeavesNothingBehind() throws Exception {
        try (ChildJvm child = new ChildJvm("exit", "65536")) {
            String name = child.await("EXPOSED").split(" ")[1];
            assertEquals(0, child.waitForExit(), child::transcript);
            assertFalse(Files.exists(ShmTestSupport.DEV_SHM.resolve(name)), "the shutdown hook removed the name");
        }
    }

    @Test
    void whatAKilledProcessLeftIsRemovedBySurvivorsAndByTheStaleScan() throws Exception {
        try (ChildJvm first = new ChildJvm("hold", "65536");
             ChildJvm second = new ChildJvm("hold", "65536");
             ShmTransport transport = new ShmTransport(Params.defaults())) {
            String[] a = first.await("EXPOSED").split(" ");
            String[] b = second.await("EXPOSED").split(" ");
            assertEquals(first.pid(), Long.parseLong(a[0]));
            assertTrue(Files.exists(ShmTestSupport.DEV_SHM.resolve(a[1])));
            assertTrue(Files.exists(ShmTestSupport.DEV_SHM.resolve(b[1])));

            // Alive processes' segments are not stale, however old.
            transport.removeStaleSegments(java.time.Duration.ZERO);
            assertTrue(Files.exists(ShmTestSupport.DEV_SHM.resolve(a[1])), "a live process's segment was removed");
            assertTrue(Files.exists(ShmTestSupport.DEV_SHM.resolve(b[1])), "a live process's segment was removed");

            first.kill();
            second.kill();
            assertTrue(Files.exists(ShmTestSupport.DEV_SHM.resolve(a[1])), "SIGKILL leaves the segment behind");

            transport.cleanUpAfter(first.pid());
            assertFalse(Files.exists(ShmTestSupport.DEV_SHM.resolve(a[1])), "cleanUpAfter removed it");
            assertTrue(Files.exists(ShmTestSupport.DEV_SHM.resolve(b[1])), "cleanUpAfter touched another pid");

            // Too young for the default grace period: kept (it might belong to another PID namespace).
            assertEquals(0, transport.removeStaleSegments(ShmTransport.STALE_AFTER));
            assertTrue(Files.exists(ShmTestSupport.DEV_SHM.resolve(b[1])));
            assertTrue(transport.removeStaleSegments(java.time.Duration.ZERO) >= 1);
            assertFalse(Files.exists(ShmTestSupport.DEV_SHM.resolve(b[1])), "the stale scan removed it");
        }
    }
}
