package org.sparkccl.core.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Random;
import java.util.zip.CRC32C;
import net.jqwik.api.Assume;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.statistics.Statistics;
import net.jqwik.api.constraints.Size;
import net.jqwik.api.lifecycle.AfterProperty;
import net.jqwik.api.lifecycle.BeforeProperty;
import org.sparkccl.core.CclException;
import org.sparkccl.core.log.CclLog;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.transport.ExposedRegion;
import org.sparkccl.core.transport.HostIdentity;
import org.sparkccl.core.wire.WireFormat;
import org.sparkccl.core.wire.WireFormatException;

/**
 * Random blobs, mutated blobs, and mutated blobs given a fresh checksum (so that the checks behind
 * the checksum are reached) handed to {@link ShmTransport#open}: each is refused with a message that
 * says what is wrong with the blob of which peer, promptly; none maps anything. The transport works in
 * a directory of its own that holds one segment, the one the valid blob names: a mutated blob that
 * still names it reaches the file's secret and size checks, any other finds no file.
 *
 * <p>Each property runs jqwik's default number of tries: 1,000 in {@code mvn verify}, 10,000 with
 * {@code -Psoak} (the {@code jqwik.tries} property of the build).
 */
class ShmConnectBlobFuzzTest {
    private static final String FROM = "refused the SHM connect blob from";
    private static final int SEGMENT_BYTES = 4096;

    private Path directory;
    private ShmTransport transport;
    private ExposedRegion segment;
    private byte[] valid;

    @BeforeProperty
    void oneSegment() throws IOException {
        directory = Files.createTempDirectory("shm-fuzz");
        transport = new ShmTransport(Params.defaults(), new CclLog(0, Params.defaults()), directory,
                () -> Long.MAX_VALUE, HostIdentity.hostId());
        segment = transport.expose(SEGMENT_BYTES, "the fuzzed blob's segment");
        valid = segment.connectBlob();
    }

    @AfterProperty
    void nothingWasMapped() throws IOException {
        assertEquals(SEGMENT_BYTES, transport.outstandingBytes(), "only the segment itself is open");
        segment.close();
        transport.close();
        Files.delete(directory); // fails if anything else was created in it
    }

    @Property
    void randomBlobsAreRefused(@ForAll @Size(max = 300) byte[] blob) {
        assertRefused(blob);
    }

    @Property
    void mutatedBlobsAreRefused(@ForAll long seed) {
        assertRefused(mutated(seed, false));
    }

    @Property
    void mutatedBlobsWithAValidChecksumAreRefused(@ForAll long seed) {
        assertRefused(mutated(seed, true));
    }

    private void assertRefused(byte[] blob) {
        Assume.that(!Arrays.equals(blob, valid));
        long start = System.nanoTime();
        RuntimeException e = assertThrows(RuntimeException.class, () -> transport.open(blob, null).close());
        String message = String.valueOf(e.getMessage());
        // Decoding refusals (WireFormatException) name the blob; a blob that decodes is refused when it
        // is opened (CclException), naming the peer and the file: none there, another secret in it, or
        // another size.
        boolean clear = e instanceof WireFormatException ? message.startsWith(FROM)
                : e instanceof CclException && message.contains(" of a peer") && message.contains(directory.toString());
        assertTrue(clear, "unclear refusal: " + e);
        // jqwik's report counts the checks each kind of blob reached.
        Statistics.collect(e instanceof WireFormatException ? "refused decoding"
                : message.contains("secret") ? "refused: another secret"
                : message.contains("connect blob says") ? "refused: another size" : "refused: no such file");
        long ms = (System.nanoTime() - start) / 1_000_000;
        assertTrue(ms < 1_000, "refusal took " + ms + " ms");
    }

    /** The valid blob cut short, lengthened or with 1..4 bytes changed; with its checksum recomputed if asked. */
    private byte[] mutated(long seed, boolean reseal) {
        Random random = new Random(seed);
        byte[] blob = valid.clone();
        switch (random.nextInt(4)) {
            case 0:
                return Arrays.copyOf(blob, random.nextInt(blob.length));
            case 1:
                return Arrays.copyOf(blob, blob.length + 1 + random.nextInt(64));
            default:
                for (int i = 1 + random.nextInt(4); i > 0; i--) {
                    // Behind magic and version when resealing: the fields only a good checksum lets through.
                    int at = reseal ? 8 + random.nextInt(ShmConnectBlob.SIZE - 8 - WireFormat.CHECKSUM_BYTES)
                            : random.nextInt(blob.length);
                    blob[at] ^= (byte) (1 + random.nextInt(255));
                }
                if (reseal) {
                    CRC32C crc = new CRC32C();
                    int end = ShmConnectBlob.SIZE - WireFormat.CHECKSUM_BYTES;
                    crc.update(blob, 0, end);
                    ByteBuffer.wrap(blob).putInt(end, (int) crc.getValue());
                }
                return blob;
        }
    }
}
