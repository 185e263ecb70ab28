package org.sparkccl.core.net;

import java.io.IOException;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.atomic.AtomicBoolean;
import org.sparkccl.core.PeerFailedException;
import org.sparkccl.core.copy.BulkCopy;
import org.sparkccl.core.wait.WaitLoop;

/**
 * The sending side of one connection: the rank's thread fills slots ({@link #acquire}, {@link #publish})
 * and they go out in order. The rank's thread writes a published slot itself while the socket takes
 * it (the usual case: the kernel's buffer has room), so a step costs no hand-off to another thread and
 * its wake-up; what the socket does not take at once the writer thread sends when the socket has room.
 * The channel is non-blocking so that the rank's thread never blocks in a write (a peer that stopped
 * reading then still ends in the collective's timeout). After an abort the writer sends the abort
 * frame once every slot before it went out; on close, the close frame.
 */
final class SendLink extends SocketLink {
    private static final long SELECT_MS = 100;
    private final ByteBuffer frameHeader = ByteBuffer.allocateDirect(12);
    private final ByteBuffer[] frame = new ByteBuffer[2];
    /** Held by whichever thread writes to the channel: the rank's or the writer. */
    private final AtomicBoolean writing = new AtomicBoolean();
    /** Views the caller's memory for {@link #send}: only the rank's thread uses it. */
    private final MemoryView direct = new MemoryView();
    private final Selector selector;
    private final String waitingForRoom;
    /** The slot whose frame is being written, or -1 when the next one starts fresh; under {@link #writing}. */
    private long inFrame = -1;
    private volatile byte[] abortMessage;
    private volatile int abortOrigin;

    SendLink(int rank, int peer, SocketChannel channel, int steps, int slotBytes) {
        super(rank, peer, channel, steps, slotBytes);
        this.waitingForRoom = "room to send to " + peerName;
        Selector opened = null;
        try {
            channel.configureBlocking(false);
            // A send buffer a whole slot fits in, so the rank's thread sends it in one write instead of
            // leaving the rest to the writer thread. The kernel caps it at net.core.wmem_max (4 MB on the
            // project's VM, 208 KB on stock Linux) and turns send autotuning off once it is set: see
            // docs/perf/socket-allreduce-notes.md before changing it.
            channel.setOption(StandardSocketOptions.SO_SNDBUF, 4 << 20);
            opened = Selector.open();
            channel.register(opened, SelectionKey.OP_WRITE);
        } catch (IOException e) {
            if (opened != null) {
                try {
                    opened.close();
                } catch (IOException ignored) {
                    // closing a selector nobody waits on: nothing to report beyond the setup failure
                }
            }
            releaseUnstarted(); // the connection and the FIFO the link took in its constructor
            throw new PeerFailedException(peer, "rank " + rank + ": cannot set up the connection to " + peerName + " ("
                    + e + "); every rank must start again with a new communicator");
        }
        selector = opened;
        start("sparkccl-rank" + rank + "-send-to-" + peer);
    }

    /** Address of the next slot to fill, once it was sent. */
    long acquire(WaitLoop wait, long step) {
        long t = tail.get();
        if (t - head.get() >= steps) {
            while (t - head.get() >= steps) {
                checkFailure();
                wait.idle(peer, step, waitingForRoom);
            }
            wait.done();
        }
        return slotAddress(t);
    }

    /**
     * Sends {@code bytes} (at most a slot) at {@code src} as one frame. When nothing published is
     * waiting, the rank's thread writes the frame straight from {@code src} and copies into a slot
     * only what the socket did not take, for the writer thread; else it copies the bytes into a slot
     * and publishes it. Either way {@code src} may change once this returns.
     */
    void send(WaitLoop wait, long step, long src, int bytes) {
        long slot = acquire(wait, step);
        if (writing.compareAndSet(false, true)) {
            try {
                if (sendPublished()) {
                    sendDirect(src, bytes);
                    return;
                }
            } catch (IOException | RuntimeException e) {
                fail(e);
                return;
            } finally {
                writing.set(false);
            }
        }
        BulkCopy.copy(src, slot, bytes);
        publish(bytes);
    }

    /**
     * Writes a frame from {@code src} while the socket takes it; the rest goes into the free slot at
     * the tail, published as the remainder of this frame. Only with {@link #writing} held and
     * nothing published waiting.
     */
    private void sendDirect(long src, int bytes) throws IOException {
        frameHeader.clear();
        frameHeader.putInt(bytes).flip();
        frame[0] = frameHeader;
        frame[1] = direct.at(src, bytes);
        while (frame[1].hasRemaining() && channel.write(frame) > 0) {
            // the socket took some: offer it the rest
        }
        int sent = frame[1].position();
        if (sent == bytes) {
            return;
        }
        long t = tail.get();
        int s = (int) (t % steps);
        BulkCopy.copy(src + sent, slotAddress(t), bytes - sent);
        lengths[s] = bytes;
        frame[1] = slots[s].clear().limit(bytes - sent);
        inFrame = t; // the header, or what is left of it, stays in frame[0]
        tail.set(t + 1);
        wakeIoThread();
    }

    /** Publishes the acquired slot, holding {@code bytes}: writes it now if the socket takes it, else leaves it to the writer. */
    void publish(int bytes) {
        long t = tail.get();
        lengths[(int) (t % steps)] = bytes;
        tail.set(t + 1);
        if (writing.compareAndSet(false, true)) {
            try {
                if (sendPublished()) {
                    return;
                }
            } catch (IOException | RuntimeException e) {
                fail(e);
            } finally {
                writing.set(false);
            }
        }
        wakeIoThread();
    }

    /** Tells the peer, after what was already published, that this rank failed and why. */
    void abort(int originRank, String message) {
        if (abortMessage == null) {
            abortOrigin = originRank;
            abortMessage = message.getBytes(StandardCharsets.UTF_8);
            wakeIoThread();
        }
    }

    /**
     * Writes published slots while the socket takes them; true once all are sent, false when the
     * socket is full. Only with {@link #writing} held.
     */
    private boolean sendPublished() throws IOException {
        while (true) {
            long h = head.get();
            if (tail.get() == h) {
                return true;
            }
            int s = (int) (h % steps);
            if (inFrame != h) {
                frameHeader.clear();
                frameHeader.putInt(lengths[s]).flip();
                frame[0] = frameHeader;
                frame[1] = slots[s].clear().limit(lengths[s]);
                inFrame = h;
            }
            channel.write(frame);
            if (frame[1].hasRemaining()) {
                return false;
            }
            inFrame = -1;
            head.set(h + 1);
        }
    }

    @Override
    void run() {
        int idle = 0;
        try {
            while (failure == null) {
                if (tail.get() == head.get()) {
                    byte[] abort = abortMessage;
                    if (abort != null && lock()) {
                        frameHeader.clear();
                        frameHeader.putInt(FRAME_ABORT).putInt(abortOrigin).putInt(abort.length).flip();
                        writeAll(frameHeader, ByteBuffer.wrap(abort));
                        return;
                    }
                    if (stopping && lock()) {
                        frameHeader.clear();
                        frameHeader.putInt(FRAME_CLOSE).flip();
                        writeAll(frameHeader);
                        return;
                    }
                    ioIdle(idle++);
                    continue;
                }
                idle = 0;
                if (!writing.compareAndSet(false, true)) {
                    Thread.onSpinWait(); // the rank's thread is writing
                    continue;
                }
                boolean sent;
                try {
                    sent = sendPublished();
                } finally {
                    writing.set(false);
                }
                if (!sent) {
                    selector.select(SELECT_MS);
                    selector.selectedKeys().clear();
                }
            }
        } catch (IOException | RuntimeException e) {
            fail(e);
        } finally {
            closeSelector();
        }
    }

    /** Takes the channel for a control frame, the last thing this link writes; false while the rank's thread writes. */
    private boolean lock() {
        return writing.compareAndSet(false, true);
    }

    private void writeAll(ByteBuffer... buffers) throws IOException {
        while (buffers[buffers.length - 1].hasRemaining()) {
            if (channel.write(buffers) == 0) {
                selector.select(SELECT_MS);
                selector.selectedKeys().clear();
            }
        }
    }

    private void fail(Throwable e) {
        if (!stopping && failure == null) {
            failure = new PeerFailedException(peer, "rank " + rank + ": sending to " + peerName + " failed (" + e
                    + "): that rank died, closed its communicator or its host dropped the connection; this"
                    + " communicator is unusable: every rank must start again with a new one");
        }
    }

    private void closeSelector() {
        try {
            selector.close();
        } catch (IOException e) {
            // nothing to do: the link is ending anyway
        }
    }
}
