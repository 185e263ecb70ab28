package org.sparkccl.core.shm;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HexFormat;
import org.agrona.concurrent.AtomicBuffer;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.transport.ExposedRegion;
import org.sparkccl.core.transport.HostIdentity;
import org.sparkccl.core.transport.SharedRegion;

/**
 * The other process of the cross-process tests, started by {@link ChildJvm}. It talks over
 * stdout lines (READY, EXPOSED, DONE) and through the shared memory itself.
 *
 * <ul>
 *   <li>{@code peer <parent blob hex> <checksum>}: opens the parent's region, checks the data the
 *       parent wrote before, exposes its own, then answers the parent's token (see
 *       {@link ShmCrossProcessTest}).</li>
 *   <li>{@code hold <bytes>}: exposes a region, prints its name and blob, and waits to be killed.</li>
 *   <li>{@code exit <bytes>}: exposes a region, prints its name, and exits without closing it.</li>
 * </ul>
 */
public final class ShmChild {
    /** Offsets in the parent's region P and the child's region C. */
    static final int TOKEN = 0;
    static final int ECHO = 8;
    static final int BYE = 16;
    static final int DATA = 64;
    static final int PATTERN_LONGS = 1000;

    private ShmChild() {
    }

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "peer":
                peer(HexFormat.of().parseHex(args[1]), Long.parseLong(args[2]));
                break;
            case "hold":
                hold(Long.parseLong(args[1]));
                break;
            case "exit":
                exitWithoutClosing(Long.parseLong(args[1]));
                break;
            default:
                throw new IllegalArgumentException("unknown mode " + args[0]);
        }
    }

    private static void peer(byte[] parentBlob, long expectedChecksum) throws Exception {
        ShmTransport transport = new ShmTransport(Params.fromEnvironment());
        SharedRegion p = transport.open(parentBlob, null);
        AtomicBuffer pb = p.buffer();
        long checksum = checksum(pb, DATA);
        if (checksum != expectedChecksum) {
            throw new AssertionError("child read checksum " + checksum + ", parent wrote " + expectedChecksum);
        }
        ExposedRegion c = transport.expose(DATA + PATTERN_LONGS * 8L, "child region");
        System.out.println("READY " + HexFormat.of().formatHex(c.connectBlob()));
        System.out.flush();

        long token = awaitNonZero(pb, TOKEN);
        AtomicBuffer cb = c.buffer();
        for (int i = 0; i < PATTERN_LONGS; i++) {
            cb.putLong(DATA + i * 8, token * (i + 1));
        }
        pb.putLongRelease(ECHO, token ^ 0x5555_5555_5555_5555L);
        cb.putLongRelease(TOKEN, token + 1); // publishes the pattern written above
        awaitNonZero(pb, BYE);

        c.close();
        p.close();
        transport.close();
        if (transport.outstandingBytes() != 0 || ShmTransport.mappedBytesInJvm() != 0) {
            throw new AssertionError("child leaked: outstanding " + transport.outstandingBytes() + ", mapped "
                    + ShmTransport.mappedBytesInJvm());
        }
        if (Files.exists(Path.of("/dev/shm", segmentName(c)))) {
            throw new AssertionError("child's segment still in /dev/shm after close");
        }
        System.out.println("DONE");
        System.out.flush();
    }

    private static String segmentName(ExposedRegion region) {
        return ((ShmRegion) region).segmentName();
    }

    private static void hold(long bytes) throws Exception {
        ShmTransport transport = new ShmTransport(Params.fromEnvironment());
        ExposedRegion region = transport.expose(bytes, "held region");
        System.out.println("EXPOSED " + HostIdentity.pid() + " " + segmentName(region) + " "
                + HexFormat.of().formatHex(region.connectBlob()));
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }

    private static void exitWithoutClosing(long bytes) {
        ShmTransport transport = new ShmTransport(Params.fromEnvironment());
        ExposedRegion region = transport.expose(bytes, "forgotten region");
        System.out.println("EXPOSED " + HostIdentity.pid() + " " + segmentName(region));
        System.out.flush();
        System.exit(0);
    }

    static long checksum(AtomicBuffer buffer, int from) {
        long sum = 0;
        for (int i = from; i + 8 <= buffer.capacity(); i += 8) {
            sum = sum * 31 + buffer.getLong(i);
        }
        return sum;
    }

    /** Spins (yielding) until the long at {@code offset} is non-zero; gives up after 60 s rather than hang. */
    static long awaitNonZero(AtomicBuffer buffer, int offset) {
        long deadline = System.nanoTime() + 60_000_000_000L;
        while (true) {
            long v = buffer.getLongAcquire(offset);
            if (v != 0) {
                return v;
            }
            if (System.nanoTime() > deadline) {
                throw new AssertionError("nothing arrived at offset " + offset + " within 60 s");
            }
            Thread.yield();
        }
    }
}
