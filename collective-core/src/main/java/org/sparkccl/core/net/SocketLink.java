package org.sparkccl.core.net;

import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import org.agrona.BufferUtil;
import org.sparkccl.core.jdk.JdkAccess;
import org.sparkccl.core.PeerFailedException;

/**
 * One TCP connection of the socket transport and its FIFO of {@code steps} slots in off-heap memory,
 * between the rank's thread and this link's I/O thread (NCCL's proxy thread, one per connection).
 * The producer fills slot {@code tail % steps} and advances {@code tail}; the consumer empties slot
 * {@code head % steps} and advances {@code head}. On the wire each slot is a frame: its length, then
 * its bytes; negative lengths are the two control frames (this rank aborted with a message; this
 * rank closed its communicator), so a peer learns why a stream ended. Every link has TCP keepalive on
 * ({@link LinkKeepalive}), so a peer host that vanishes without a reset still ends the link.
 */
abstract class SocketLink implements AutoCloseable {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    /**
     * The abort frame: this length word, the rank the failure started at, how many collectives the
     * sender completed before it failed, and the message. A receiver still in one of those calls
     * finishes it (everything the sender owed that call is on the stream before this frame: the
     * sender completed it) and fails at its next: a collective every rank completed does not fail
     * because a rank aborted after it, as when Spark kills a task between two collectives.
     */
    static final int FRAME_ABORT = -1;
    /** An abort frame's fixed part: length word, origin, completed calls, message length. */
    static final int ABORT_PREFIX = 4 + 4 + 8 + 4;
    static final int FRAME_CLOSE = -2;
    private static final AtomicLong OUTSTANDING = new AtomicLong();
    private static final long IDLE_PARK_NS = TimeUnit.MILLISECONDS.toNanos(100);
    private static final int SPINS = 200;

    final int rank;
    final int peer;
    final SocketChannel channel;
    /** "rank 3 (10.0.0.2:41234)": for messages. */
    final String peerName;
    final int steps;
    final int slotBytes;
    private final ByteBuffer fifo;
    final long fifoAddress;
    final ByteBuffer[] slots;
    final AtomicLong tail = new AtomicLong();
    final AtomicLong head = new AtomicLong();
    volatile RuntimeException failure;
    volatile boolean stopping;
    private Thread thread;
    private boolean closed;

    SocketLink(int rank, int peer, SocketChannel channel, int steps, int slotBytes) {
        this.rank = rank;
        this.peer = peer;
        this.channel = channel;
        this.peerName = "rank " + peer + " (" + remote(channel) + ")";
        try {
            LinkKeepalive.enable(channel);
        } catch (IOException e) {
            SocketListener.closeQuietly(channel);
            throw new PeerFailedException(peer, "rank " + rank + ": cannot turn on TCP keepalive on the connection with "
                    + peerName + " (" + e + "); every rank must start again with a new communicator");
        }
        this.steps = steps;
        this.slotBytes = slotBytes;
        this.fifo = ByteBuffer.allocateDirect(steps * slotBytes);
        OUTSTANDING.addAndGet(fifo.capacity());
        this.fifoAddress = BufferUtil.address(fifo);
        this.slots = new ByteBuffer[steps];
        for (int s = 0; s < steps; s++) {
            slots[s] = fifo.slice(s * slotBytes, slotBytes);
        }
    }

    /** Counts off-heap bytes of a connection that is not a SocketLink ({@link DirectLink}) with the links'. */
    static void countOffHeap(long bytes) {
        OUTSTANDING.addAndGet(bytes);
    }

    /** Off-heap bytes of every link in this JVM not closed yet: tests assert it returns to 0. */
    static long outstandingBytes() {
        return OUTSTANDING.get();
    }

    final void start(String name) {
        thread = new Thread(this::run, name);
        thread.setDaemon(true);
        thread.start();
    }

    /** The I/O thread's loop; ends on failure or once {@link #stopping} and nothing is left to do. */
    abstract void run();

    final long slotAddress(long step) {
        return fifoAddress + (step % steps) * (long) slotBytes;
    }

    /** Wakes the I/O thread after the rank's side moved (it parks while there is nothing to do). */
    final void wakeIoThread() {
        LockSupport.unpark(thread);
    }

    /** The I/O thread's idle: spins briefly, then parks until woken (or a while, to re-check). */
    final void ioIdle(int round) {
        if (round < SPINS) {
            Thread.onSpinWait();
        } else {
            LockSupport.parkNanos(this, IDLE_PARK_NS);
        }
    }

    /** Throws this link's failure, if there is one. */
    final void checkFailure() {
        RuntimeException f = failure;
        if (f != null) {
            throw f;
        }
    }

    final void readFully(ByteBuffer buffer) throws IOException {
        while (buffer.hasRemaining()) {
            if (channel.read(buffer) < 0) {
                throw new EOFException("end of stream");
            }
        }
    }

    /** Stops the I/O thread (after {@code graceMs} for what it still has to do), closes the connection, frees the FIFO. */
    final void shutDown(long graceMs) {
        if (closed) {
            return;
        }
        closed = true;
        stopping = true;
        wakeIoThread();
        join(graceMs);
        SocketListener.closeQuietly(channel);
        join(1000);
        if (!thread.isAlive()) {
            BufferUtil.free(fifo);
            OUTSTANDING.addAndGet(-fifo.capacity());
        }
        // else: the thread still touches the FIFO; leaving it to the GC is better than freeing it under the thread.
    }

    /** Undoes the constructor for a subclass whose own setup failed before {@link #start}: no thread yet. */
    final void releaseUnstarted() {
        closed = true;
        SocketListener.closeQuietly(channel);
        BufferUtil.free(fifo);
        OUTSTANDING.addAndGet(-fifo.capacity());
    }

    /** Closes at once: nothing left in the FIFO is sent. */
    @Override
    public void close() {
        shutDown(0);
    }

    private void join(long ms) {
        try {
            thread.join(Math.max(1, ms));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** The peer's address as "host:port", for messages. */
    static String remote(SocketChannel ch) {
        try {
            return String.valueOf(ch.getRemoteAddress()).replaceFirst("^[^/]*/", "");
        } catch (IOException e) {
            return "?";
        }
    }
}
