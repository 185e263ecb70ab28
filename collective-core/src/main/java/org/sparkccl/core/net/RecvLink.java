package org.sparkccl.core.net;

import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.AsynchronousCloseException;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import org.sparkccl.core.CclException;
import org.sparkccl.core.PeerFailedException;
import org.sparkccl.core.wait.WaitLoop;

/**
 * The receiving side of one connection: the reader thread reads frames into free slots, the rank's
 * thread consumes them ({@link #acquire}, {@link #release}). The end of the stream becomes this
 * link's failure, worded by how it ended (the peer's abort message, its close, or nothing: it died),
 * and is thrown to the rank once every slot that arrived before it was consumed.
 */
final class RecvLink extends SocketLink {
    private static final int MAX_ABORT_MESSAGE = 64 << 10;
    private final ByteBuffer frameHeader = ByteBuffer.allocateDirect(ABORT_PREFIX - 4);
    private final String waitingForData;
    /** Bytes of the frame in each slot. */
    private final int[] lengths;
    /** Collectives the peer completed before it aborted, from its abort frame; -1 where it did not say so. */
    private volatile long peerCompletedCalls = -1;

    RecvLink(int rank, int peer, SocketChannel channel, int steps, int slotBytes) {
        super(rank, peer, channel, steps, slotBytes);
        this.waitingForData = "data from " + peerName;
        this.lengths = new int[steps];
        start("sparkccl-rank" + rank + "-recv-from-" + peer);
    }

    /**
     * Address of the next slot once it arrived; it must hold {@code expectedBytes}, or the ranks run
     * different collectives.
     */
    long acquire(WaitLoop wait, long step, int expectedBytes) {
        long h = head.get();
        if (tail.get() == h) {
            while (tail.get() == h) {
                checkFailure();
                wait.idle(peer, step, waitingForData);
            }
            wait.done();
        }
        int got = lengths[(int) (h % steps)];
        if (got != expectedBytes) {
            throw new CclException("rank " + rank + ": " + peerName + " sent " + got + " bytes at step " + step
                    + " where this rank expected " + expectedBytes + ": the ranks run different collectives; every"
                    + " rank must make the same calls, in the same order, with the same count and type");
        }
        return slotAddress(h);
    }

    /** Address of the next slot if it arrived and holds {@code bytes}, without taking it; else 0. */
    long peek(int bytes) {
        long h = head.get();
        if (tail.get() == h || lengths[(int) (h % steps)] != bytes) {
            return 0;
        }
        return slotAddress(h);
    }

    void release() {
        head.set(head.get() + 1);
        wakeIoThread();
    }

    @Override
    void run() {
        int idle = 0;
        try {
            while (true) {
                long t = tail.get();
                if (t - head.get() >= steps) {
                    if (stopping) {
                        return;
                    }
                    ioIdle(idle++);
                    continue;
                }
                idle = 0;
                frameHeader.clear().limit(4);
                readFully(frameHeader);
                int n = frameHeader.getInt(0);
                if (n == FRAME_ABORT) {
                    failure = readAbort();
                    return;
                }
                if (n == FRAME_CLOSE) {
                    failure = new CclException("rank " + rank + ": " + peerName + " closed its communicator while this"
                            + " rank still expected data from it; did rank " + peer + " skip a collective that this"
                            + " rank called?");
                    return;
                }
                if (n < 0 || n > slotBytes) {
                    failure = new CclException("rank " + rank + ": " + peerName + " sent a frame of " + n + " bytes,"
                            + " more than a slot (" + slotBytes + "): different SPARKCCL_SOCKET settings or sparkccl"
                            + " versions on the two ranks?");
                    return;
                }
                int s = (int) (t % steps);
                ByteBuffer data = slots[s];
                data.clear().limit(n);
                readFully(data);
                lengths[s] = n;
                tail.set(t + 1);
            }
        } catch (AsynchronousCloseException e) {
            if (!stopping) {
                failure = new CclException("rank " + rank + ": the connection from " + peerName + " was closed");
            }
        } catch (IOException | RuntimeException e) {
            if (!stopping) {
                String how = e instanceof EOFException ? "ended without a goodbye" : "broke (" + e + ")";
                failure = new PeerFailedException(peer, "rank " + rank + ": the connection from " + peerName + " " + how
                        + ": that rank died or its host dropped the connection; this communicator is unusable:"
                        + " every rank must start again with a new one");
            }
        }
    }

    /**
     * The link failed only after the peer completed collective {@code call}: nothing of that call is
     * missing here, so a rank may still finish it ({@link SocketLink#FRAME_ABORT}).
     */
    boolean failedAfter(long call) {
        return failure != null && call <= peerCompletedCalls;
    }

    private RuntimeException readAbort() throws IOException {
        frameHeader.clear().limit(ABORT_PREFIX - 4); // the rest after the length word
        readFully(frameHeader);
        int origin = frameHeader.getInt(0);
        peerCompletedCalls = frameHeader.getLong(4);
        int length = Math.min(Math.max(frameHeader.getInt(12), 0), MAX_ABORT_MESSAGE);
        ByteBuffer text = ByteBuffer.allocate(length);
        readFully(text);
        return new PeerFailedException(origin, "rank " + rank + ": " + peerName + " aborted: "
                + new String(text.array(), StandardCharsets.UTF_8));
    }
}
