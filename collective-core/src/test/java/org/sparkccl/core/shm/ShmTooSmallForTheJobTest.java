package org.sparkccl.core.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.function.IntToLongFunction;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.sparkccl.core.bootstrap.ThreadGroupBootstrap;
import org.sparkccl.core.log.CclLog;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.transport.HostIdentity;

/**
 * A whole communicator of 3 ranks over SHM when the segment directory reports 256 KiB free (far less
 * than the ring buffers): every rank fails while the communicator is built, before any segment is
 * created, saying how many bytes are needed, how many are free, and how to give it more
 * ({@code --shm-size}) or ask for less (BUFFSIZE, NCHANNELS).
 */
class ShmTooSmallForTheJobTest {
    private static final long FREE = 256 << 10;

    @Test
    void everyRankFailsBeforeAllocatingWithTheBytesNeededAndTheFix(@TempDir Path dir) throws Exception {
        List<String> errors = buildThreeRanks(dir, rank -> FREE);
        for (String message : errors) {
            assertTrue(message.contains("is too small") && message.contains("--shm-size")
                    && message.contains("SPARKCCL_BUFFSIZE") && message.contains(FREE + " bytes"), message);
            Matcher needed = Pattern.compile("needs (\\d+) bytes").matcher(message);
            assertTrue(needed.find() && Long.parseLong(needed.group(1)) > FREE, message);
        }
        try (Stream<Path> files = Files.list(dir)) {
            assertEquals(0, files.count(), "nothing was created");
        }
    }

    /** Only rank 1 lacks room: it fails as above, and the others fail too, promptly, instead of waiting for it. */
    @Test
    void whenOneRankLacksRoomEveryRankFails(@TempDir Path dir) throws Exception {
        long start = System.nanoTime();
        List<String> errors = buildThreeRanks(dir, rank -> rank == 1 ? FREE : Long.MAX_VALUE);
        long ms = (System.nanoTime() - start) / 1_000_000;
        assertTrue(errors.get(1).contains("--shm-size"), errors.get(1));
        for (String message : errors) {
            assertTrue(!message.startsWith("NO ERROR") && message.contains("rank 1"), message);
        }
        assertTrue(ms < 10_000, "took " + ms + " ms: " + errors);
        try (Stream<Path> files = Files.list(dir)) {
            assertEquals(0, files.count(), "the other ranks' segments were removed");
        }
    }

    /**
     * Three ranks (threads) build a host communicator over /dev/shm in {@code dir}, rank r seeing
     * {@code free.applyAsLong(r)} bytes free there; returns what each got: its error message, or
     * {@code NO ERROR on rank r}.
     */
    private static List<String> buildThreeRanks(Path dir, IntToLongFunction free) throws Exception {
        Params params = Params.defaults();
        return new ThreadGroupBootstrap.Group(3, Duration.ofSeconds(60)).run(bootstrap -> {
            long bytes = free.applyAsLong(bootstrap.rank());
            ShmTransport shm = new ShmTransport(params, new CclLog(bootstrap.rank(), params), dir, () -> bytes,
                    HostIdentity.hostId());
            try (ShmCommunicator comm = ShmCommunicator.create(bootstrap, List.of(shm), params)) {
                return "NO ERROR on rank " + comm.rank();
            } catch (RuntimeException e) {
                return String.valueOf(e.getMessage());
            } finally {
                shm.close();
            }
        }, Duration.ofSeconds(120));
    }
}
