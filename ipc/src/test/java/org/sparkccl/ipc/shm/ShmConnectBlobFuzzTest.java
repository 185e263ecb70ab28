package org.sparkccl.ipc.shm;

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
import net.jqwik.api.Tag;
import net.jqwik.api.constraints.Size;
import net.jqwik.api.lifecycle.AfterProperty;
import net.jqwik.api.lifecycle.BeforeProperty;
import org.sparkccl.core.CclException;
import org.sparkccl.core.log.CclLog;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.transport.HostIdentity;

/**
 * Random blobs, mutated blobs, and mutated blobs given a fresh checksum (so that the checks behind
 * the checksum are reached) handed to {@link ShmTransport#open}: each is refused with a message that
 * says what is wrong with the blob of which peer, promptly; none maps anything. The transport works in
 * an empty directory of its own, so that a blob that passes every check finds no file to open.
 */
class ShmConnectBlobFuzzTest {
    private static final String FROM = "the SHM connect blob from";
    private static final byte[] VALID = new ShmConnectBlob(HostIdentity.pid(), 4096,
            ShmConnectBlob.hostDigest(HostIdentity.hostId()), ShmSegmentName.newName(HostIdentity.pid())).encode();

    private Path directory;
    private ShmTransport transport;

    @BeforeProperty
    void emptyDirectory() throws IOException {
        directory = Files.createTempDirectory("shm-fuzz");
        transport = new ShmTransport(Params.defaults(), new CclLog(0, Params.defaults()), directory,
                () -> Long.MAX_VALUE, HostIdentity.hostId());
    }

    @AfterProperty
    void nothingWasMapped() throws IOException {
        assertTrue(transport.outstandingBytes() == 0, "bytes left open: " + transport.outstandingBytes());
        transport.close();
        Files.delete(directory); // fails if anything was created in it
    }

    @Property(tries = 1000)
    void randomBlobsAreRefused(@ForAll @Size(max = 300) byte[] blob) {
        assertRefused(blob);
    }

    @Property(tries = 1000)
    void mutatedBlobsAreRefused(@ForAll long seed) {
        assertRefused(mutated(seed, false));
    }

    @Property(tries = 1000)
    void mutatedBlobsWithAValidChecksumAreRefused(@ForAll long seed) {
        assertRefused(mutated(seed, true));
    }

    @Property(tries = 10_000)
    @Tag("soak")
    void randomBlobsSoak(@ForAll @Size(max = 300) byte[] blob) {
        assertRefused(blob);
    }

    @Property(tries = 10_000)
    @Tag("soak")
    void mutatedBlobsSoak(@ForAll long seed) {
        assertRefused(mutated(seed, false));
        assertRefused(mutated(seed, true));
    }

    private void assertRefused(byte[] blob) {
        Assume.that(!Arrays.equals(blob, VALID));
        long start = System.nanoTime();
        RuntimeException e = assertThrows(RuntimeException.class, () -> transport.open(blob, null).close());
        String message = String.valueOf(e.getMessage());
        // Decoding refusals (IllegalArgumentException) name the blob; a blob that decodes but names
        // no file here is refused when it is opened (CclException), naming the file.
        boolean clear = e instanceof IllegalArgumentException ? message.startsWith(FROM)
                : e instanceof CclException && message.contains("shared memory of a peer");
        assertTrue(clear, "unclear refusal: " + e);
        long ms = (System.nanoTime() - start) / 1_000_000;
        assertTrue(ms < 1_000, "refusal took " + ms + " ms");
    }

    /** The valid blob cut short, lengthened or with 1..4 bytes changed; with its checksum recomputed if asked. */
    private static byte[] mutated(long seed, boolean reseal) {
        Random random = new Random(seed);
        byte[] blob = VALID.clone();
        switch (random.nextInt(4)) {
            case 0:
                return Arrays.copyOf(blob, random.nextInt(blob.length));
            case 1:
                return Arrays.copyOf(blob, blob.length + 1 + random.nextInt(64));
            default:
                for (int i = 1 + random.nextInt(4); i > 0; i--) {
                    // Behind magic and version when resealing: the fields only a good checksum lets through.
                    int at = reseal ? 8 + random.nextInt(ShmConnectBlob.SIZE - 12) : random.nextInt(blob.length);
                    blob[at] ^= (byte) (1 + random.nextInt(255));
                }
                if (reseal) {
                    CRC32C crc = new CRC32C();
                    crc.update(blob, 0, ShmConnectBlob.SIZE - 4);
                    ByteBuffer.wrap(blob).putInt(ShmConnectBlob.SIZE - 4, (int) crc.getValue());
                }
                return blob;
        }
    }
}
