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
 * or hands over bytes where they lie ({@link #send}), and they go out in order. The rank's thread
 * writes what is published itself while the socket takes it (the usual case: the kernel's buffer has
 * room), every waiting frame in one gathering write, so a step costs no hand-off to another thread
 * and its wake-up; what the socket does not take at once the writer thread sends when the socket has
 * room. The channel is non-blocking so that the rank's thread never blocks in a write (a peer that
 * stopped reading then still ends in the collective's timeout). After an abort the writer sends the
 * abort frame once every slot before it went out; on close, the close frame.
 *
 * <p>Each published step's frame is two buffers, set up when it is published: its length header
 * and its body (the slot, or the caller's memory). A frame the socket took only in part keeps its
 * progress in their positions. A body in the caller's memory that did not go out is copied into its
 * slot before the rank's thread lets go of the channel, or, for a frame handed to the writer thread
 * ({@code handOff}), when the rank settles ({@link #settle}, {@link #settleIfOverlaps}); from then on
 * the writer sends it from the slot.
 */
final class SendLink extends SocketLink {
    private static final long SELECT_MS = 100;
    private final ByteBuffer controlFrame = ByteBuffer.allocateDirect(ABORT_PREFIX);
    private final ByteBuffer[] frameHeaders;
    private final ByteBuffer[] frameBodies;
    /** Per slot: views of the caller's memory for bodies that {@link #send} hands over where they lie. */
    private final MemoryView[] views;
    /** Where each view points (its length is the body's limit): for {@link #settleIfOverlaps} and {@link #keepUnsentInSlots}. */
    private final long[] viewAddresses;
    /** The buffers of the frames one write gathers; under {@link #writing}. */
    private final ByteBuffer[] gather;
    /** Held by whichever thread writes to the channel: the rank's or the writer. */
    private final AtomicBoolean writing = new AtomicBoolean();
    private final Selector selector;
    private final String waitingForRoom;
    /** Frames whose bodies lie in the caller's memory were handed to the writer thread since the last {@link #settle}; the rank's thread only. */
    private boolean viewsHandedOff;
    private volatile byte[] abortMessage;
    private volatile int abortOrigin;
    private volatile long abortCompletedCalls;

    SendLink(int rank, int peer, SocketChannel channel, int steps, int slotBytes) {
        super(rank, peer, channel, steps, slotBytes);
        this.waitingForRoom = "room to send to " + peerName;
        this.frameHeaders = new ByteBuffer[steps];
        this.frameBodies = new ByteBuffer[steps];
        this.views = new MemoryView[steps];
        this.viewAddresses = new long[steps];
        this.gather = new ByteBuffer[2 * steps];
        for (int s = 0; s < steps; s++) {
            frameHeaders[s] = ByteBuffer.allocateDirect(4);
            views[s] = new MemoryView();
        }
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
        awaitFreeSlots(wait, step, 1);
        return slotAddress(tail.get());
    }

    private void awaitFreeSlots(WaitLoop wait, long step, int needed) {
        if (tail.get() - head.get() > steps - needed) {
            while (tail.get() - head.get() > steps - needed) {
                checkFailure();
                wait.idle(peer, step, waitingForRoom);
            }
            wait.done();
        }
    }

    /** As {@link #send(WaitLoop, long, long, int, long, int, boolean)}: no frame before it, written by the rank's thread. */
    void send(WaitLoop wait, long step, long src, int bytes) {
        send(wait, step, 0, 0, src, bytes, false);
    }

    /**
     * Sends {@code bytes} (at most a slot) at {@code src} as one frame, after a frame of {@code
     * firstBytes} at {@code first} where {@code firstBytes > 0} (a collective's header: both then
     * go out in one write, and the peer's reader takes both in one wake-up).
     *
     * <p>With {@code handOff} the writer thread sends them from where they lie, while the rank's
     * thread goes on (to write another link's part of the same step: two connections then fill in
     * parallel); the memory must stay unchanged until {@link #settle}. Without it, when the rank's
     * thread has the channel it writes them straight from where they lie together with anything
     * published before them, and copies into slots only what the socket did not take, for the
     * writer thread; else it copies them into slots and publishes them; either way the memory may
     * change once this returns.
     */
    void send(WaitLoop wait, long step, long first, int firstBytes, long src, int bytes, boolean handOff) {
        awaitFreeSlots(wait, step, firstBytes > 0 ? 2 : 1);
        if (handOff) {
            // Slots at the tail are the rank's until it publishes them: no lock needed to fill them in.
            if (firstBytes > 0) {
                publishView(first, firstBytes);
            }
            publishView(src, bytes);
            viewsHandedOff = true;
            wakeIoThread();
            return;
        }
        if (writing.compareAndSet(false, true)) {
            // The frames are set up in the free slots at the tail but published only if the socket does
            // not take them: a writer thread that saw them published would spin on the channel while
            // this thread writes (on a host short of cores, that costs the write its core).
            long t = tail.get();
            long end = t;
            try {
                if (firstBytes > 0) {
                    setUpView(end++, first, firstBytes);
                }
                setUpView(end++, src, bytes);
                if (writeFrames(end) < end) {
                    keepUnsentInSlots(t, end);
                    tail.set(end);
                }
            } catch (IOException | RuntimeException e) {
                fail(e);
            } finally {
                writing.set(false);
            }
            if (tail.get() != head.get()) {
                wakeIoThread();
            }
            return;
        }
        if (firstBytes > 0) {
            BulkCopy.copy(first, slotAddress(tail.get()), firstBytes);
            publish(firstBytes, false);
        }
        BulkCopy.copy(src, slotAddress(tail.get()), bytes);
        publish(bytes, false);
    }

    /**
     * Publishes the acquired slot, holding {@code bytes}. With {@code handOff} the writer thread sends
     * it; without, the rank's thread writes it now if the socket takes it, else leaves it to the writer.
     */
    void publish(int bytes, boolean handOff) {
        long t = tail.get();
        int s = (int) (t % steps);
        frameHeaders[s].clear().putInt(bytes).flip();
        frameBodies[s] = slots[s].clear().limit(bytes);
        tail.set(t + 1);
        if (!handOff && writing.compareAndSet(false, true)) {
            try {
                if (writePublished()) {
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

    /**
     * Makes the caller's memory free again after {@link #send} handed frames off: what the writer
     * thread has not sent of them yet is copied into their slots (it goes on from there). Waits at
     * most for one non-blocking write of the writer thread's to return.
     */
    void settle() {
        if (!viewsHandedOff) {
            return;
        }
        while (!writing.compareAndSet(false, true)) {
            Thread.onSpinWait();
        }
        try {
            keepUnsentInSlots(head.get(), tail.get());
        } finally {
            writing.set(false);
        }
        viewsHandedOff = false;
    }

    /**
     * {@link #settle}s if a frame handed off and not sent yet lies in {@code [address, address + bytes)}:
     * the rank's thread calls it before it writes there.
     */
    void settleIfOverlaps(long address, long bytes) {
        if (!viewsHandedOff) {
            return;
        }
        for (long i = head.get(); i < tail.get(); i++) {
            int s = (int) (i % steps);
            ByteBuffer body = frameBodies[s];
            if (body != slots[s] && viewAddresses[s] < address + bytes && address < viewAddresses[s] + body.limit()) {
                settle();
                return;
            }
        }
    }

    /** Publishes a frame whose body is the caller's memory, until {@link #keepUnsentInSlots} copies what is left of it into its slot. */
    private void publishView(long src, int bytes) {
        long t = tail.get();
        setUpView(t, src, bytes);
        tail.set(t + 1);
    }

    /** Sets up frame {@code i} (a free slot's) to send {@code bytes} at {@code src}, without publishing it. */
    private void setUpView(long i, long src, int bytes) {
        int s = (int) (i % steps);
        viewAddresses[s] = src;
        frameHeaders[s].clear().putInt(bytes).flip();
        frameBodies[s] = views[s].at(src, bytes);
    }

    /**
     * Copies what the socket did not take of the bodies of frames {@code from} to {@code to} (not
     * included) that lie in the caller's memory into their slots, so that the caller may reuse its
     * memory and the writer thread sends from the slots. Only with {@link #writing} held.
     */
    private void keepUnsentInSlots(long from, long to) {
        for (long i = Math.max(from, head.get()); i < to; i++) {
            int s = (int) (i % steps);
            ByteBuffer body = frameBodies[s];
            if (body != slots[s]) {
                int left = body.remaining();
                BulkCopy.copy(viewAddresses[s] + body.position(), slotAddress(i), left);
                frameBodies[s] = slots[s].clear().limit(left);
            }
        }
    }

    /**
     * Tells the peer, after what was already published, that this rank failed and why, and how many
     * collectives it completed first (the peer may finish those: see {@link SocketLink#FRAME_ABORT}).
     */
    void abort(int originRank, long completedCalls, String message) {
        if (abortMessage == null) {
            abortOrigin = originRank;
            abortCompletedCalls = completedCalls;
            abortMessage = message.getBytes(StandardCharsets.UTF_8);
            wakeIoThread();
        }
    }

    /**
     * Writes the published frames, all in one gathering write, while the socket takes them; true
     * once all are sent, false when the socket is full. Only with {@link #writing} held.
     */
    private boolean writePublished() throws IOException {
        while (true) {
            long end = tail.get();
            if (writeFrames(end) < end) {
                return false;
            }
            if (tail.get() == end) {
                return true;
            }
        }
    }

    /**
     * Writes frames from the head up to {@code end} (not included; beyond the tail: the rank's own,
     * set up but not published) in gathering writes while the socket takes them, and moves the head
     * past the published ones that went out. Returns the first frame not completely written ({@code
     * end} when all were). Only with {@link #writing} held.
     */
    private long writeFrames(long end) throws IOException {
        long first = head.get();
        while (first < end) {
            int n = 0;
            for (long i = first; i < end; i++) {
                int s = (int) (i % steps);
                gather[n++] = frameHeaders[s];
                gather[n++] = frameBodies[s];
            }
            long wrote = channel.write(gather, 0, n);
            while (first < end && !frameHeaders[(int) (first % steps)].hasRemaining()
                    && !frameBodies[(int) (first % steps)].hasRemaining()) {
                first++;
            }
            head.set(Math.min(first, tail.get()));
            if (wrote == 0) {
                break;
            }
        }
        return first;
    }

    @Override
    void run() {
        int idle = 0;
        try {
            while (failure == null) {
                if (tail.get() == head.get()) {
                    byte[] abort = abortMessage;
                    if (abort != null && lock()) {
                        controlFrame.clear();
                        controlFrame.putInt(FRAME_ABORT).putInt(abortOrigin).putLong(abortCompletedCalls).putInt(abort.length).flip();
                        writeAll(controlFrame, ByteBuffer.wrap(abort));
                        return;
                    }
                    if (stopping && lock()) {
                        controlFrame.clear();
                        controlFrame.putInt(FRAME_CLOSE).flip();
                        writeAll(controlFrame);
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
                    sent = writePublished();
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
