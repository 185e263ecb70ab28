package org.sparkccl.core.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.sparkccl.core.CclException;
import org.sparkccl.core.log.CclLog;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.transport.HostIdentity;

/** A /dev/shm too small for the buffers is reported before anything is allocated, with the fix. */
class ShmFreeSpaceTest {

    @Test
    void tooLittleFreeSpaceIsReportedWithSizesAndTheFix(@TempDir Path dir) throws IOException {
        long free = 1 << 20;
        long wanted = 64L << 20;
        try (ShmTransport transport = new ShmTransport(Params.defaults(), new CclLog(3, Params.defaults()), dir,
                () -> free, HostIdentity.hostId())) {
            CclException e = assertThrows(CclException.class, () -> transport.expose(wanted, "rank 3 ring buffers"));
            String message = e.getMessage();
            // The file holds a header page before the region.
            assertTrue(message.contains("needs " + (ShmSegmentHeader.BYTES + wanted) + " bytes"), message);
            assertTrue(message.contains(Long.toString(free)), message);
            assertTrue(message.contains("--shm-size"), message);
            assertTrue(message.contains("rank 3 ring buffers"), message);
            assertEquals(0, transport.outstandingBytes());
            try (Stream<Path> files = Files.list(dir)) {
                assertEquals(0, files.count(), "nothing was created");
            }
            // Enough room: it works in the same directory.
            transport.expose(free - ShmSegmentHeader.BYTES, "fits").close();
        }
    }

    @Test
    void neededSpaceIsCountedInWholePages(@TempDir Path dir) {
        // One page of region and the header page.
        try (ShmTransport transport = new ShmTransport(Params.defaults(), new CclLog(0, Params.defaults()), dir,
                () -> 8192, HostIdentity.hostId())) {
            transport.expose(4096, "one page").close();
            CclException e = assertThrows(CclException.class, () -> transport.expose(4097, "a page and a byte"));
            assertTrue(e.getMessage().contains("needs 12288 bytes"), e.getMessage());
        }
    }
}
