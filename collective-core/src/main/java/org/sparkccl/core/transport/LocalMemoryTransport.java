package org.sparkccl.core.transport;

import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.agrona.UnsafeApi;
import org.agrona.concurrent.AtomicBuffer;
import org.agrona.concurrent.UnsafeBuffer;
import org.sparkccl.core.jdk.JdkAccess;
import org.sparkccl.core.wire.WireFormat;

/**
 * Ranks that share one JVM (threads; Spark local mode) share plain off-heap memory: no file, no
 * mapping. A region is freed when its owner and every rank that opened it have closed it.
 */
public final class LocalMemoryTransport implements MemoryTransport {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    public static final String NAME = "LOCAL";
    /** The body is the region's id: 16 random bytes in hex. Version 1 had no magic, length or CRC32C. */
    private static final WireFormat BLOB = WireFormat.sealed("LOCAL connect blob", 0x53434C4D, 2); // "SCLM"
    private static final int ID_CHARS = 32;
    private static final SecureRandom RANDOM = new SecureRandom();
    private static final Map<String, Block> BLOCKS = new ConcurrentHashMap<>();
    private static final AtomicLong OUTSTANDING = new AtomicLong();

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public String unavailableReason() {
        return null;
    }

    @Override
    public String cannotConnectReason(RankInfo me, RankInfo peer) {
        return me.sameProcess(peer) ? null : "rank " + peer.rank() + " runs in another process";
    }

    @Override
    public ExposedRegion expose(long bytes, String label) {
        if (bytes <= 0 || bytes > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("region size " + bytes + " out of range (1 .. 2 GiB)");
        }
        byte[] idBytes = new byte[16];
        RANDOM.nextBytes(idBytes);
        String id = HexFormat.of().formatHex(idBytes);
        long address = UnsafeApi.allocateMemory(bytes);
        UnsafeApi.setMemory(address, bytes, (byte) 0);
        OUTSTANDING.addAndGet(bytes);
        Block block = new Block(id, address, bytes);
        BLOCKS.put(id, block);
        return new LocalExposed(block);
    }

    @Override
    public SharedRegion open(byte[] connectBlob, RankInfo owner) {
        byte[] id = new byte[ID_CHARS];
        BLOB.open(connectBlob, ID_CHARS, String.valueOf(owner)).get(id);
        Block block = BLOCKS.get(new String(id, StandardCharsets.US_ASCII));
        if (block == null || !block.retain()) {
            throw new IllegalStateException("the memory of " + owner + " is gone (closed before it was opened)");
        }
        return new LocalView(block);
    }

    @Override
    public long outstandingBytes() {
        return OUTSTANDING.get();
    }

    /** Bytes held by every LOCAL region in this JVM. */
    public static long outstandingBytesInJvm() {
        return OUTSTANDING.get();
    }

    private static final class Block {
        final String id;
        final long address;
        final long bytes;
        final AtomicInteger refs = new AtomicInteger(1);

        Block(String id, long address, long bytes) {
            this.id = id;
            this.address = address;
            this.bytes = bytes;
        }

        boolean retain() {
            while (true) {
                int r = refs.get();
                if (r == 0) {
                    return false;
                }
                if (refs.compareAndSet(r, r + 1)) {
                    return true;
                }
            }
        }

        void release() {
            if (refs.decrementAndGet() == 0) {
                BLOCKS.remove(id);
                UnsafeApi.freeMemory(address);
                OUTSTANDING.addAndGet(-bytes);
            }
        }
    }

    private static class LocalView implements SharedRegion {
        final Block block;
        final AtomicBuffer buffer;
        private boolean closed;

        LocalView(Block block) {
            this.block = block;
            this.buffer = new UnsafeBuffer(block.address, (int) block.bytes);
        }

        @Override
        public AtomicBuffer buffer() {
            return buffer;
        }

        @Override
        public synchronized void close() {
            if (!closed) {
                closed = true;
                block.release();
            }
        }
    }

    private static final class LocalExposed extends LocalView implements ExposedRegion {
        LocalExposed(Block block) {
            super(block);
        }

        @Override
        public byte[] connectBlob() {
            return BLOB.seal(block.id.getBytes(StandardCharsets.US_ASCII));
        }

        @Override
        public void unlinkName() {
            // Nothing is named outside this JVM.
        }
    }
}
