package org.sparkccl.core.net;

import java.io.IOException;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.agrona.BufferUtil;
import org.agrona.UnsafeApi;
import org.sparkccl.core.CclException;
import org.sparkccl.core.PeerFailedException;
import org.sparkccl.core.jdk.JdkAccess;
import org.sparkccl.core.proto.CollectiveHeader;

/**
 * One TCP connection between two ranks that only the ranks' own threads read and write: no FIFO
 * and no I/O thread, so a frame costs the receiver no hand-off (the rank itself reads the socket,
 * polling it briefly, then sleeping in the selector until the bytes come) and the sender one
 * gathering write. It serves {@link RecursiveDoubling}, both ways on one connection. A frame is
 * its length, the sender's two collective headers (its call and the two-level call it is part of)
 * and the data; negative lengths are the ring's control frames (abort with origin and message,
 * close). The channel is non-blocking: a rank never blocks in a write, and it reads the
 * connection's next frame, up to its end and no further, into this link's buffer, from which the
 * collective reduces it in place.
 */
final class DirectLink implements AutoCloseable {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    /** The length word and the two headers: what every data frame starts with. */
    static final int PREFIX = 4 + 2 * CollectiveHeader.BYTES;
    private static final int UNKNOWN = Integer.MIN_VALUE;
    private static final int MAX_ABORT_MESSAGE = 64 << 10;
    private static final long CONTROL_WRITE_NS = TimeUnit.MILLISECONDS.toNanos(200);

    final int rank;
    final int peer;
    final SocketChannel channel;
    /** "rank 3 (10.0.0.2:41234)": for messages. */
    final String peerName;
    final String waitingForData;
    final String waitingForRoom;
    private final ByteBuffer in;
    private final long inAddress;
    private final ByteBuffer outPrefix = ByteBuffer.allocateDirect(PREFIX);
    private final long outPrefixAddress = BufferUtil.address(outPrefix);
    private final MemoryView outBody = new MemoryView();
    private final ByteBuffer[] out = new ByteBuffer[2];
    /** Length word of the frame being read; {@link #UNKNOWN} until its first 4 bytes are in. */
    private int frameLength = UNKNOWN;
    /** A frame is partly written: its body still points at the caller's memory. */
    private boolean writing;
    private boolean peerClosed;
    private RuntimeException failure;
    /** Collectives the peer completed before it aborted, from its abort frame; -1 where it did not say so. */
    private long peerCompletedCalls = -1;
    private SelectionKey key;
    private int interest;
    private boolean closed;

    DirectLink(int rank, int peer, SocketChannel channel, int maxBodyBytes) {
        this.rank = rank;
        this.peer = peer;
        this.channel = channel;
        this.peerName = "rank " + peer + " (" + SocketLink.remote(channel) + ")";
        this.waitingForData = "data from " + peerName + " (direct connection)";
        this.waitingForRoom = "room to send to " + peerName + " (direct connection)";
        this.in = ByteBuffer.allocateDirect(PREFIX + maxBodyBytes);
        this.inAddress = BufferUtil.address(in);
        SocketLink.countOffHeap(in.capacity() + outPrefix.capacity());
        try {
            LinkKeepalive.enable(channel);
            channel.configureBlocking(false);
            // A send buffer a whole halving step fits in (as SendLink's): the rank's one write then
            // hands the kernel the frame, and the rank goes on to read instead of waiting for room,
            // which depends on the peer's reads and its window updates. Left to autotuning the buffer
            // starts at 16 KB, and on the 2-core VM 2 ranks' 1 MB calls had stalls of 4-26 ms (a few
            // in 100 calls) that a 4 MB buffer did not show (docs/perf/socket-allreduce-notes.md).
            // The kernel caps it at net.core.wmem_max (see SendLink).
            channel.setOption(StandardSocketOptions.SO_SNDBUF, 4 << 20);
        } catch (IOException e) {
            close();
            throw new PeerFailedException(peer, "rank " + rank + ": cannot set up the direct connection with " + peerName
                    + " (" + e + "); every rank must start again with a new communicator");
        }
        in.limit(PREFIX);
    }

    void register(Selector selector) throws IOException {
        key = channel.register(selector, 0, this);
    }

    /**
     * Starts sending one frame: {@code headers} (two collective headers, 64 bytes) and {@code bytes}
     * at {@code src}, straight from there; what the socket does not take now goes out in later
     * {@link #writeSome} calls, and {@code src} must stay unchanged until {@link #writePending} is false.
     */
    synchronized void startFrame(long headers, long src, int bytes) {
        checkFailure();
        outPrefix.clear();
        outPrefix.putInt(0, 2 * CollectiveHeader.BYTES + bytes);
        UnsafeApi.copyMemory(headers, outPrefixAddress + 4, 2 * CollectiveHeader.BYTES);
        out[0] = outPrefix;
        out[1] = outBody.at(src, bytes);
        writing = true;
        writeSome();
    }

    /** Writes what the socket takes of the frame being sent; true if it took anything. */
    synchronized boolean writeSome() {
        if (!writing) {
            return false;
        }
        try {
            long wrote = channel.write(out);
            if (!out[1].hasRemaining()) {
                writing = false;
                out[1] = null;
            }
            return wrote > 0;
        } catch (IOException e) {
            writing = false;
            out[1] = null;
            throw fail(new PeerFailedException(peer, "rank " + rank + ": sending to " + peerName + " failed (" + e
                    + "): that rank died, closed its communicator or its host dropped the connection; this"
                    + " communicator is unusable: every rank must start again with a new one"));
        }
    }

    synchronized boolean writePending() {
        return writing;
    }

    /**
     * Reads what has arrived of the connection's next frame, without going past its end; true if
     * anything came. Throws the peer's abort, its death (the stream ended without a goodbye), a frame
     * too long for this link, and, where {@code awaited} (this rank needs the frame now), the peer's
     * close. An awaited frame of {@code expectedBody} data bytes is read in one go, length and all (one
     * syscall, not two): a frame of another length is another call's, which fails this one anyway.
     * An abort from a peer that completed collective {@code call} is kept, not thrown, unless its
     * frame is awaited: this rank may still finish that call ({@link SocketLink#FRAME_ABORT}).
     */
    boolean readSome(boolean awaited, int expectedBody, long call) {
        if (failure != null) {
            if (!awaited && call <= peerCompletedCalls) {
                return false;
            }
            throw failure;
        }
        if (peerClosed) {
            if (awaited) {
                throw fail(new CclException("rank " + rank + ": " + peerName + " closed its communicator while this"
                        + " rank still expected data from it; did rank " + peer + " skip a collective that this"
                        + " rank called?"));
            }
            return false;
        }
        boolean progressed = false;
        while (true) {
            if (frameLength == UNKNOWN && in.position() >= 4) {
                int n = in.getInt(0);
                if (n == SocketLink.FRAME_ABORT) {
                    fail(readAbort());
                    return readSome(awaited, expectedBody, call) || true; // throws unless the abort is kept
                }
                if (n == SocketLink.FRAME_CLOSE) {
                    peerClosed = true;
                    return readSome(awaited, expectedBody, call) || true; // throws where the frame is awaited
                }
                if (n < 2 * CollectiveHeader.BYTES || n > in.capacity() - 4) {
                    throw fail(new CclException("rank " + rank + ": " + peerName + " sent a direct frame of " + n
                            + " bytes where at most " + (in.capacity() - 4) + " fit: different SPARKCCL_SOCKET_SMALL_BYTES or SPARKCCL_SOCKET_HALVING_BYTES"
                            + " settings or sparkccl versions on the two ranks?"));
                }
                frameLength = n;
            }
            int limit = frameLength != UNKNOWN ? 4 + frameLength
                    : awaited && expectedBody >= 0 && expectedBody <= in.capacity() - PREFIX ? PREFIX + expectedBody : PREFIX;
            if (in.position() >= limit) {
                return progressed;
            }
            in.limit(limit);
            int got;
            try {
                got = channel.read(in);
            } catch (IOException e) {
                throw fail(died("broke (" + e + ")"));
            }
            if (got < 0) {
                throw fail(died("ended without a goodbye"));
            }
            if (got == 0) {
                return progressed;
            }
            progressed = true;
        }
    }

    /** The frame being read arrived whole. */
    boolean complete() {
        return frameLength != UNKNOWN && in.position() >= 4 + frameLength;
    }

    /** Where the complete frame's two headers lie. */
    long headersAddress() {
        return inAddress + 4;
    }

    /** Where the complete frame's data lies, and its length. */
    long bodyAddress() {
        return inAddress + PREFIX;
    }

    int bodyBytes() {
        return frameLength - 2 * CollectiveHeader.BYTES;
    }

    /** The complete frame was used: the next read starts the connection's next frame. */
    void consumed() {
        in.clear().limit(PREFIX);
        frameLength = UNKNOWN;
    }

    /** Sets what the selector wakes this rank for: the next frame's bytes, and room while a frame is partly written. */
    void updateInterest() {
        int ops = (failure == null && !peerClosed && !complete() ? SelectionKey.OP_READ : 0)
                | (writePending() ? SelectionKey.OP_WRITE : 0);
        if (ops != interest && key != null && key.isValid()) {
            key.interestOps(ops);
            interest = ops;
        }
    }

    /**
     * Tells the peer that this rank failed, why, and after how many completed collectives (or, with a
     * null message, that it closed its communicator), after the frame it is writing, if that goes out
     * within a short while; else the frame stays cut and the connection is closed, which the peer
     * reports as this rank's death.
     */
    synchronized void sendControl(int originRank, long completedCalls, String message) {
        if (closed) {
            return;
        }
        long until = System.nanoTime() + CONTROL_WRITE_NS;
        try {
            while (writing && System.nanoTime() - until < 0) {
                if (!writeSome()) {
                    LockSupport.parkNanos(50_000);
                }
            }
            if (writing) {
                writing = false;
                out[1] = null;
                SocketListener.closeQuietly(channel);
                return;
            }
            byte[] text = message == null ? new byte[0] : message.getBytes(StandardCharsets.UTF_8);
            ByteBuffer frame = ByteBuffer.allocate(message == null ? 4 : SocketLink.ABORT_PREFIX + text.length);
            if (message == null) {
                frame.putInt(SocketLink.FRAME_CLOSE);
            } else {
                frame.putInt(SocketLink.FRAME_ABORT).putInt(originRank).putLong(completedCalls).putInt(text.length).put(text);
            }
            frame.flip();
            while (frame.hasRemaining() && System.nanoTime() - until < 0) {
                if (channel.write(frame) == 0) {
                    LockSupport.parkNanos(50_000);
                }
            }
        } catch (IOException | RuntimeException e) {
            // the peer is gone or going: it learns from the connection's end instead
        }
    }

    private void checkFailure() {
        RuntimeException f = failure;
        if (f != null) {
            throw f;
        }
    }

    private RuntimeException fail(RuntimeException e) {
        if (failure == null) {
            failure = e;
        }
        return failure;
    }

    private PeerFailedException died(String how) {
        return new PeerFailedException(peer, "rank " + rank + ": the connection from " + peerName + " " + how
                + ": that rank died or its host dropped the connection; this communicator is unusable:"
                + " every rank must start again with a new one");
    }

    /**
     * The rest of an abort frame (origin, completed calls, length, message), read within a short
     * while: its sender wrote it whole.
     */
    private RuntimeException readAbort() {
        long until = System.nanoTime() + CONTROL_WRITE_NS;
        try {
            if (in.position() < SocketLink.ABORT_PREFIX) {
                in.limit(SocketLink.ABORT_PREFIX);
            }
            while (in.position() < SocketLink.ABORT_PREFIX) {
                int got = channel.read(in);
                if (got < 0 || System.nanoTime() - until > 0) {
                    return died("ended inside an abort frame");
                }
                if (got == 0) {
                    LockSupport.parkNanos(50_000);
                }
            }
            int origin = in.getInt(4);
            long completed = in.getLong(8);
            int length = Math.min(Math.max(in.getInt(16), 0), MAX_ABORT_MESSAGE);
            ByteBuffer text = ByteBuffer.allocate(length);
            int already = Math.min(length, in.position() - SocketLink.ABORT_PREFIX);
            for (int i = 0; i < already; i++) {
                text.put(in.get(SocketLink.ABORT_PREFIX + i));
            }
            while (text.hasRemaining()) {
                int got = channel.read(text);
                if (got < 0 || System.nanoTime() - until > 0) {
                    break;
                }
                if (got == 0) {
                    LockSupport.parkNanos(50_000);
                }
            }
            peerCompletedCalls = completed;
            return new PeerFailedException(origin, "rank " + rank + ": " + peerName + " aborted: "
                    + new String(text.array(), 0, text.position(), StandardCharsets.UTF_8));
        } catch (IOException e) {
            return died("broke (" + e + ")");
        }
    }

    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        out[1] = null;
        SocketListener.closeQuietly(channel);
        BufferUtil.free(in);
        BufferUtil.free(outPrefix);
        SocketLink.countOffHeap(-(in.capacity() + outPrefix.capacity()));
    }
}
