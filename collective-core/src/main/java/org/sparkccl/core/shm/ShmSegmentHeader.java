package org.sparkccl.core.shm;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.util.Arrays;
import org.sparkccl.core.CclException;
import org.sparkccl.core.wire.WireFormat;

/**
 * The first page of every segment file, in front of the region that the owner and its peers map:
 * a sealed {@link WireFormat} message whose body is the segment's secret (random for each segment,
 * and carried in the segment's connect blob), then zeros to the end of the page. (Version 2 was
 * the magic "SCCLSHM2" and the secret, unsealed.)
 *
 * A peer reads the header through the file (it never maps it) and maps the region only when the
 * file holds the secret that the blob it was given names, as a GPU window's opener checks the
 * window's secret. So a blob made for another segment, communicator or job, or an older blob of a
 * name whose file was replaced, is refused before any byte of the region is mapped. It is a check
 * against mix-ups and stale descriptions, not against processes of the same user, which can read
 * /dev/shm anyway; other users cannot open the file at all (mode 0600).
 */
final class ShmSegmentHeader {
    /** A whole page, so that the region behind it can be mapped at a page-aligned file offset. */
    static final int BYTES = (int) ShmTransport.PAGE_SIZE;
    static final WireFormat FORMAT = WireFormat.sealed("SHM segment header", 0x53435348, 3); // "SCSH"
    static final int SECRET_BYTES = 16;
    private static final int USED_BYTES = WireFormat.ENVELOPE_BYTES + SECRET_BYTES;
    private static final SecureRandom RANDOM = new SecureRandom();

    private ShmSegmentHeader() {
    }

    static byte[] newSecret() {
        byte[] secret = new byte[SECRET_BYTES];
        RANDOM.nextBytes(secret);
        return secret;
    }

    /** Writes the header at the start of a new segment file (whose first page is already zero). */
    static void write(FileChannel channel, byte[] secret) throws IOException {
        ByteBuffer header = ByteBuffer.wrap(FORMAT.seal(secret));
        while (header.hasRemaining()) {
            channel.write(header, header.position());
        }
    }

    /**
     * Throws unless the file behind {@code channel} starts with a header holding {@code secret};
     * {@code from} and {@code path} name the peer and the file in the error.
     */
    static void check(FileChannel channel, byte[] secret, Path path, String from) throws IOException {
        ByteBuffer header = ByteBuffer.allocate(USED_BYTES);
        int read;
        do {
            read = channel.read(header, header.position());
        } while (read > 0 && header.hasRemaining());
        byte[] held = new byte[SECRET_BYTES];
        FORMAT.open(Arrays.copyOf(header.array(), header.position()), SECRET_BYTES, from + " (" + path
                + "; nothing was mapped)").get(held);
        checkSecret(held, secret, path, from);
    }

    /** Throws unless the segment's secret, {@code held}, is the one its blob names. */
    static void checkSecret(byte[] held, byte[] named, Path path, String from) {
        if (!MessageDigest.isEqual(held, named)) {
            throw new CclException("refused the shared memory of " + from + " (" + path + "): the segment does not"
                    + " hold the secret that its connect blob names, so the blob was made for another segment,"
                    + " communicator or job, or is stale (the file was replaced); nothing was mapped. Each rank"
                    + " must open the blobs of its own communicator's bootstrap round");
        }
    }
}
