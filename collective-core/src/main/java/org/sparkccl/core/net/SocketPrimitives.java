package org.sparkccl.core.net;

import org.sparkccl.core.DataType;
import org.sparkccl.core.jdk.JdkAccess;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.copy.BulkCopy;
import org.sparkccl.core.proto.Primitives;
import org.sparkccl.core.reduce.Reduction;
import org.sparkccl.core.wait.WaitLoop;

/**
 * The ring primitives over TCP ({@link SocketRing}): Simple's semantics with the slots in local
 * FIFOs that the links' I/O threads move across. Step s of either direction uses link s mod k, so
 * the bytes of one collective spread over every connection. Data that is already in memory (the
 * user's buffer, a received slot) is written to the socket from where it lies when the link is idle
 * ({@link SendLink#send}); a reduce step with nowhere to keep its result (recvReduceSend) reduces the
 * received slot and this rank's data straight into the outgoing slot. A receiver checks every
 * slot's length against its own, so ranks that disagree about a collective fail instead of
 * misreading data.
 *
 * <p>A collective's header ({@link #sendHeader}, {@link #recvHeader}) is a frame of its own on the
 * link of the collective's first step, outside the steps' count: it goes out in one write with that
 * step's data, or alone just before this rank first waits to receive, or at {@link #finish} when the
 * collective sends nothing; so a call costs the peer's reader one wake-up less, and ranks that all
 * wait to receive first (different calls) still see each other's headers and fail at once.
 */
public final class SocketPrimitives implements Primitives {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    private final SocketRing ring;
    private final WaitLoop wait;
    private final int slotBytes;
    private final int links;
    /** Steps of {@link #SPLIT_MIN_BYTES} and more go out in one piece per link, written in parallel (see {@link #pieceBytes}). */
    private final boolean splitSteps;
    private long sendStep;
    private long recvStep;
    private DataType type = DataType.UINT8;
    private ReduceOp op = ReduceOp.SUM;
    private int nranks = 1;
    /** Runs before this collective's first receive (see {@link #beforeFirstReceive}); null once it ran. */
    private Runnable beforeFirstReceive;
    /** This collective's header while it waits to go out with the first step ({@link #sendHeader}); 0 bytes once sent. */
    private long header;
    private int headerBytes;

    /**
     * Below this a step stays one piece: a hand-off to a writer thread (its wake-up) costs more than
     * a second connection saves. Measured on loopback, 16 cores, one 512 KB step: 85 us a step on one
     * connection, 58 us as two halves written by two threads on two (docs/perf/socket-allreduce-notes.md).
     */
    static final int SPLIT_MIN_BYTES = 128 << 10;

    SocketPrimitives(SocketRing ring, WaitLoop wait, int slotBytes, boolean splitSteps) {
        this.ring = ring;
        this.wait = wait;
        this.slotBytes = slotBytes;
        this.links = ring.out.length;
        this.splitSteps = splitSteps && links > 1;
    }

    @Override
    public void begin(DataType type, ReduceOp op, int nranks) {
        this.type = type;
        this.op = op;
        this.nranks = nranks;
    }

    /**
     * Runs {@code check} just before the next receive (or at {@link #finish}, for a collective that
     * receives nothing): a collective's header check then waits for the predecessor's header only once
     * this rank's first data step went out, so the header's trip round the ring overlaps the data's.
     */
    void beforeFirstReceive(Runnable check) {
        this.beforeFirstReceive = check;
    }

    /**
     * Sends this collective's header, {@code bytes} at {@code src}, with its first step (see the class
     * comment); {@code src} must stay unchanged until the collective's {@link #finish}.
     */
    void sendHeader(long src, int bytes) {
        this.header = src;
        this.headerBytes = bytes;
    }

    /**
     * Receives the predecessor's header of this collective (see {@link #sendHeader}) into {@code dst}.
     * Only from the check before the first receive, which runs once this rank's own header went out.
     */
    void recvHeader(long dst, int bytes) {
        RecvLink link = ring.in[(int) (recvStep % links)];
        BulkCopy.copy(link.acquire(wait, recvStep, bytes), dst, bytes);
        link.release();
    }

    /**
     * Where the predecessor's header for its next collective over the ring lies, if it arrived (a
     * frame of {@code bytes} at the head of the link the next receive reads), without taking it; else 0.
     */
    long peekHeader(int bytes) {
        return ring.in[(int) (recvStep % links)].peek(bytes);
    }

    /** Ends a collective: sends the header if nothing took it along, and runs a check still pending from {@link #beforeFirstReceive}. */
    void finish() {
        sendPendingHeader();
        runPendingCheck();
        settle();
    }

    /** Sends the header alone, if it is still waiting for a step to go out with. */
    private void sendPendingHeader() {
        if (headerBytes > 0) {
            int n = headerBytes;
            headerBytes = 0;
            ring.out[(int) (sendStep % links)].send(wait, sendStep, header, n);
        }
    }

    private void runPendingCheck() {
        Runnable check = beforeFirstReceive;
        if (check != null) {
            beforeFirstReceive = null;
            check.run();
        }
    }

    /** Bytes one step carries. */
    public int slotBytes() {
        return slotBytes;
    }

    /** Slots that may be in flight towards the successor: a ring chunk must not need more before it receives. */
    public long capacityBytes() {
        return (long) slotBytes * links * ring.out[0].steps;
    }

    @Override
    public void send(long src, long bytes) {
        int piece = pieceBytes(bytes);
        for (long done = 0; done < bytes; done += piece) {
            int n = (int) Math.min(piece, bytes - done);
            sendFrom(src + done, n, done + n < bytes);
        }
    }

    @Override
    public void recv(long dst, long bytes) {
        int piece = pieceBytes(bytes);
        for (long done = 0; done < bytes; done += piece) {
            int n = (int) Math.min(piece, bytes - done);
            long in = acquireRecv(n);
            beforeWriting(dst + done, n);
            BulkCopy.copy(in, dst + done, n);
            releaseRecv();
        }
    }

    @Override
    public void recvReduceSend(long src, long bytes) {
        int piece = pieceBytes(bytes);
        for (long done = 0; done < bytes; done += piece) {
            int n = (int) Math.min(piece, bytes - done);
            long in = acquireRecv(n);
            Reduction.reduce(type, op, in, src + done, acquireSend(), n / type.size());
            publishSend(n, done + n < bytes);
            releaseRecv();
        }
    }

    @Override
    public void recvReduceCopySend(long src, long dst, long bytes, boolean finish) {
        int piece = pieceBytes(bytes);
        for (long done = 0; done < bytes; done += piece) {
            int n = (int) Math.min(piece, bytes - done);
            reduceInto(src + done, dst + done, n, finish);
            sendFrom(dst + done, n, done + n < bytes);
        }
    }

    @Override
    public void recvReduceCopy(long src, long dst, long bytes, boolean finish) {
        int piece = pieceBytes(bytes);
        for (long done = 0; done < bytes; done += piece) {
            reduceInto(src + done, dst + done, (int) Math.min(piece, bytes - done), finish);
        }
    }

    @Override
    public void recvCopySend(long dst, long bytes) {
        int piece = pieceBytes(bytes);
        for (long done = 0; done < bytes; done += piece) {
            int n = (int) Math.min(piece, bytes - done);
            long in = acquireRecv(n);
            beforeWriting(dst + done, n);
            if (splitSteps && done + n < bytes) {
                // Handed off: the writer sends it from dst, which stays as it is; the slot goes back now.
                BulkCopy.copy(in, dst + done, n);
                sendFrom(dst + done, n, true);
            } else {
                sendFrom(in, n, false);
                BulkCopy.copy(in, dst + done, n);
            }
            releaseRecv();
        }
    }

    /**
     * Makes the memory the collective handed to writer threads the caller's again (see {@link
     * SendLink#settle}): at the end of every collective, and before an abort returns to the caller.
     */
    void settle() {
        for (SendLink link : ring.out) {
            link.settle();
        }
    }

    private void reduceInto(long src, long dst, int n, boolean finish) {
        long count = n / type.size();
        long in = acquireRecv(n);
        beforeWriting(dst, n);
        Reduction.reduce(type, op, in, src, dst, count);
        releaseRecv();
        if (finish && op == ReduceOp.AVG) {
            Reduction.divide(type, dst, count, nranks);
        }
    }

    /**
     * Bytes per piece of a step of {@code bytes}: a slot, or where steps are split, the step's share
     * of each link (rounded up to 64 bytes: whole elements of every type), so that the pieces of one
     * step go out on all links at once, the writer threads sending all but the last while the rank's
     * thread writes that one. Sender and receiver compute the same pieces.
     */
    private int pieceBytes(long bytes) {
        if (splitSteps && bytes >= SPLIT_MIN_BYTES) {
            long share = ((bytes + links - 1) / links + 63) & ~63L;
            return (int) Math.min(slotBytes, share);
        }
        return slotBytes;
    }

    /** Before the rank's thread writes {@code [dst, dst + n)}: bytes still to be sent from there are kept first. */
    private void beforeWriting(long dst, int n) {
        for (SendLink link : ring.out) {
            link.settleIfOverlaps(dst, n);
        }
    }

    /**
     * Sends {@code n} bytes at {@code src} as the next step (see {@link SendLink#send}: no copy when the
     * link is idle); with {@code handOff} the link's writer thread sends it from {@code src}, which
     * must stay unchanged until {@link #settle} or {@link #beforeWriting} there.
     */
    private void sendFrom(long src, int n, boolean handOff) {
        int withHeader = headerBytes;
        headerBytes = 0;
        ring.out[(int) (sendStep % links)].send(wait, sendStep, header, withHeader, src, n, handOff && splitSteps);
        sendStep++;
    }

    private long acquireSend() {
        sendPendingHeader();
        return ring.out[(int) (sendStep % links)].acquire(wait, sendStep);
    }

    private void publishSend(int n, boolean handOff) {
        ring.out[(int) (sendStep % links)].publish(n, handOff && splitSteps);
        sendStep++;
    }

    private long acquireRecv(int expectedBytes) {
        sendPendingHeader();
        runPendingCheck();
        return ring.in[(int) (recvStep % links)].acquire(wait, recvStep, expectedBytes);
    }

    private void releaseRecv() {
        ring.in[(int) (recvStep % links)].release();
        recvStep++;
    }
}
