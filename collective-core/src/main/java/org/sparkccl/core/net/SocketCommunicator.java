package org.sparkccl.core.net;

import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.agrona.UnsafeApi;
import org.sparkccl.core.CclException;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.DataType;
import org.sparkccl.core.shm.ShmCommunicator;
import org.sparkccl.core.memory.HostStagingBuffer;
import org.sparkccl.core.jdk.JdkAccess;
import org.sparkccl.core.MemoryKind;
import org.sparkccl.core.PeerFailedException;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.StagingBuffer;
import org.sparkccl.core.copy.BulkCopy;
import org.sparkccl.core.log.CclLog;
import org.sparkccl.core.log.Subsys;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.proto.CollectiveHeader;
import org.sparkccl.core.proto.CollectiveHeader.Kind;
import org.sparkccl.core.proto.Protocol;
import org.sparkccl.core.ring.RingCollectives;
import org.sparkccl.core.transport.RankInfo;
import org.sparkccl.core.wait.WaitLoop;
import org.sparkccl.core.warmup.WarmUp;

/**
 * The host engine over TCP: a group of ranks (any hosts) in one ring, each rank linked to its
 * successor by {@link Params#SOCKET_CONNECTIONS} connections ({@link SocketRing}), running
 * {@link RingCollectives} on {@link SocketPrimitives}. Every collective first sends its 32-byte
 * header round the ring, so that ranks whose calls differ fail (a failing rank's abort travels on
 * round the ring with its message). All-reduces of up to {@link Params#SOCKET_SMALL_BYTES} go by
 * {@link RecursiveDoubling} over direct connections instead, their headers on every frame, and
 * those up to {@link Params#SOCKET_HALVING_BYTES} over the same connections by halving, then
 * doubling. Ranks are numbered by their place in the group.
 */
public final class SocketCommunicator implements Communicator {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    /**
     * Slots per link FIFO: with the slot size ({@code BUFFSIZE / STEPS}), how far a sender may run
     * ahead of its successor. Two slots of 512 KB rather than four of 256 KB (the same memory): a
     * 1 MB all-reduce of 2 ranks then moves each step as one frame instead of two, and every frame
     * costs a syscall and a wake-up of the reader on each side. Measured on loopback, 2 ranks, best
     * call of 3 interleaved runs: 1 MB 342 -> 267 us, 4 MB 1487 -> 1217, 16 MB 6715 -> 5333; 4 ranks
     * within noise (docs/perf/socket-allreduce-notes.md).
     */
    static final int STEPS = 2;
    /**
     * Microseconds a rank polls its direct connections before it sleeps in the selector, where it has
     * a core of its own (docs/perf/socket-allreduce-notes.md).
     */
    static final long DEFAULT_POLL_US = 50;
    /**
     * The same where the host's ranks outnumber its cores; they yield between polls there, so a
     * waiting rank hands its core to whoever needs it, and it stays awake as OpenMPI's ranks do: the
     * sleep in the selector and the wake-up cost a rank that shares its core a scheduler round each.
     * 4 ranks on the 2-core VM, 1 / 4 KB, 4 interleaved rounds, median of the slower rank's median
     * call: 200 us 78 / 93 us, 1000 us 74 / 76 us, OpenMPI 104 / 103 us (2000 and 5000 us: no better,
     * more spread; docs/perf/socket-allreduce-notes.md).
     */
    static final long OVERSUBSCRIBED_POLL_US = 1000;
    private final int rank;
    private final int size;
    private final int[] group;
    /** {@link #layout()}: set once connected. */
    private String layout = "one rank";
    private final CclLog log;
    private SocketRing ring;
    private WaitLoop wait;
    private SocketPrimitives primitives;
    /** The small all-reduce's direct connections; null where it is off or the group has one rank. */
    private RecursiveDoubling small;
    /** This rank's header and its outer call's, then the predecessor's two. */
    private final long headerScratch = UnsafeApi.allocateMemory(4L * CollectiveHeader.BYTES);
    private int sequence;
    /** The number of the last collective this rank completed: what its abort frames say ({@link #abort}). */
    private volatile long completedCalls;
    private CollectiveHeader outer;
    private String brokenBy;
    private boolean closed;

    /** One collective's ring work, given the primitives and the chunk size in elements. */
    @FunctionalInterface
    private interface RingWork {
        void run(SocketPrimitives p, long chunkElems);
    }

    private SocketCommunicator(int rank, int[] group, CclLog log) {
        this.rank = rank;
        this.size = group.length;
        this.group = group.clone();
        this.log = log;
    }

    /**
     * Builds the ring of {@code group} (global ranks, in ring order; this rank is among them) from the
     * bootstrap round's descriptions {@code all}, over {@code listener} (started). {@code tag} tells
     * this ring's connections from other rings of the same ranks. Collective: every rank of the group.
     */
    public static SocketCommunicator create(SocketListener listener, RankInfo[] all, int myGlobalRank, int[] group,
                                            int tag, Params params, BooleanSupplier cancelled) {
        int pos = indexOf(group, myGlobalRank);
        SocketCommunicator comm = new SocketCommunicator(pos, group, new CclLog(myGlobalRank, params));
        try {
            comm.connect(listener, all, myGlobalRank, tag, params, cancelled);
            WarmUp.run(comm, params, comm.log);
            return comm;
        } catch (RuntimeException e) {
            comm.close();
            throw e;
        }
    }

    private void connect(SocketListener listener, RankInfo[] all, int me, int tag, Params params,
                         BooleanSupplier cancelled) {
        if (size == 1) {
            return;
        }
        int connections = params.get(Params.SOCKET_CONNECTIONS);
        int slotBytes = (int) Math.max(4096, Math.min(Integer.MAX_VALUE / 2, params.get(Params.BUFFSIZE) / STEPS)) & ~63;
        long timeoutMs = params.get(Params.TIMEOUT_MS);
        int next = group[(rank + 1) % size];
        int prev = group[(rank + size - 1) % size];
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        ring = SocketRing.connect(listener, me, prev, next, NetRound.address(all[next]), tag, connections, STEPS,
                slotBytes, deadline, cancelled);
        // Ranks that outnumber the host's cores spin less, as on shared memory: here the links' I/O
        // threads need the cores too.
        wait = new WaitLoop(me, ShmCommunicator.spinsBeforeYield(params, all[me].ranksOnHost(all)), timeoutMs, ring,
                cancelled);
        int split = params.get(Params.SOCKET_SPLIT);
        boolean splitSteps = split < 0 ? NetRound.coresForParallelLinks(all, connections) : split > 0;
        primitives = new SocketPrimitives(ring, wait, slotBytes, splitSteps);
        long smallBytes = Math.min(params.get(Params.SOCKET_SMALL_BYTES), Integer.MAX_VALUE / 2);
        long directBytes = Math.max(smallBytes, Math.min(params.get(Params.SOCKET_HALVING_BYTES), Integer.MAX_VALUE / 2));
        if (smallBytes > 0 && !"Ring".equalsIgnoreCase(params.get(Params.ALGO))) {
            boolean oversubscribed = all[me].ranksOnHost(all) > Runtime.getRuntime().availableProcessors();
            long pollUs = params.get(Params.SOCKET_POLL_US);
            if (pollUs < 0) {
                pollUs = oversubscribed ? OVERSUBSCRIBED_POLL_US : DEFAULT_POLL_US;
            }
            small = RecursiveDoubling.connect(listener, all, group, rank, tag, (int) directBytes, (int) smallBytes,
                    TimeUnit.MICROSECONDS.toNanos(pollUs), oversubscribed, wait, deadline, cancelled);
            log.info(Subsys.NET, "Direct %02d : %d -> %s for all-reduces up to %d B (recursive doubling over direct"
                    + " connections, halving then doubling above %d B; polls %d us)", tag, me, partnerRanks(), directBytes,
                    smallBytes, pollUs);
        }
        StringBuilder text = new StringBuilder();
        for (int i = 0; i <= size; i++) {
            text.append(i == 0 ? "" : " -> ").append(group[i % size]);
        }
        log.info(Subsys.GRAPH, "Ring %02d : %s over TCP", tag, text);
        long hosts = java.util.Arrays.stream(group).mapToObj(r -> all[r].hostId()).distinct().count();
        layout = "one TCP ring: " + size + " ranks on " + hosts + " host(s)";
        log.info(Subsys.NET, "Channel %02d : %d[%d] -> %d[%d] via NET/Socket (%d connection(s) to %s, %d x %d B slots"
                        + " each; steps of %d KB and more %s)", tag, me, all[me].pid(), next, all[next].pid(), connections,
                NetRound.address(all[next]), STEPS, slotBytes, SocketPrimitives.SPLIT_MIN_BYTES >> 10,
                splitSteps ? "split across the connections, sent in parallel"
                        : split == 0 ? "not split (SPARKCCL_SOCKET_SPLIT=0)" : "not split (too few cores per rank)");
    }

    private String partnerRanks() {
        StringBuilder text = new StringBuilder("[");
        for (int p : RecursiveDoubling.partners(rank, size)) {
            text.append(text.length() > 1 ? ", " : "").append(group[p]);
        }
        return text.append(']').toString();
    }

    private static int indexOf(int[] group, int rank) {
        for (int i = 0; i < group.length; i++) {
            if (group[i] == rank) {
                return i;
            }
        }
        throw new IllegalArgumentException("rank " + rank + " is not in its own group " + java.util.Arrays.toString(group));
    }

    @Override
    public int rank() {
        return rank;
    }

    @Override
    public int size() {
        return size;
    }

    @Override
    public MemoryKind memoryKind() {
        return MemoryKind.HOST;
    }

    @Override
    public String layout() {
        return layout;
    }

    @Override
    public void allReduce(long send, long recv, long count, DataType type, ReduceOp op) {
        int es = type.size();
        if (small != null && count >= 0 && count * es <= small.maxBytes()) {
            runSmall(send, recv, count, type, op);
            return;
        }
        run(Kind.ALL_REDUCE, type, op, 0, count, count * es, send, recv, (p, chunk) ->
                RingCollectives.allReduce(p, send, recv, 0, count, es, size, rank, chunk));
    }

    @Override
    public void reduceScatter(long send, long recv, long recvCount, DataType type, ReduceOp op) {
        int es = type.size();
        int[] ring = identity();
        run(Kind.REDUCE_SCATTER, type, op, 0, recvCount, recvCount * es, send, recv, (p, chunk) ->
                RingCollectives.reduceScatter(p, send, recv, recvCount, 0, recvCount, es, ring, rank, chunk));
    }

    @Override
    public void allGather(long send, long recv, long sendCount, DataType type) {
        int es = type.size();
        int[] ring = identity();
        run(Kind.ALL_GATHER, type, ReduceOp.SUM, 0, sendCount, sendCount * es, send, recv, (p, chunk) ->
                RingCollectives.allGather(p, send, recv, sendCount, 0, sendCount, es, ring, rank, chunk));
    }

    @Override
    public void broadcast(long send, long recv, long count, DataType type, int root) {
        checkRoot(rank, root, size);
        int es = type.size();
        run(Kind.BROADCAST, type, ReduceOp.SUM, root, count, count * es, send, recv, (p, chunk) ->
                RingCollectives.broadcast(p, send, recv, 0, count, es, size, rank, root, chunk));
    }

    @Override
    public void barrier() {
        try (HostStagingBuffer token = new HostStagingBuffer(4)) {
            UnsafeApi.putInt(token.address(), 1);
            run(Kind.BARRIER, DataType.INT32, ReduceOp.SUM, 0, 1, 4, token.address(), token.address(), (p, chunk) ->
                    RingCollectives.allReduce(p, token.address(), token.address(), 0, 1, 4, size, rank, 1));
        }
    }

    @Override
    public StagingBuffer allocateStaging(long bytes) {
        return new HostStagingBuffer(bytes);
    }

    /**
     * One collective: the header round the ring, then the ring work. {@code localBytes} is what a
     * single rank copies from {@code send} to {@code recv} (all the work there is with one rank).
     */
    private void run(Kind kind, DataType type, ReduceOp op, int root, long count, long localBytes, long send, long recv,
                     RingWork work) {
        ensureUsable();
        if (count < 0) {
            throw new IllegalArgumentException("rank " + rank + ": negative element count " + count);
        }
        if (size == 1) {
            if (send != recv && localBytes > 0) {
                BulkCopy.copy(send, recv, localBytes);
            }
            return;
        }
        CollectiveHeader mine = new CollectiveHeader(++sequence, kind, type, op, Protocol.SIMPLE, root, count);
        if (log.infoEnabled(Subsys.COLL)) {
            log.info(Subsys.COLL, "%s over TCP", mine.describe());
        }
        try {
            ring.beginCall(mine.sequence);
            wait.startCollective(mine);
            CollectiveHeader outerCall = outer;
            outer = null;
            int h = CollectiveHeader.BYTES;
            writeHeaders(mine, outerCall);
            primitives.begin(type, op, size);
            primitives.sendHeader(headerScratch, 2 * h);
            // The predecessor's header is checked before anything it sent is read, but only once this
            // rank's first data step went out: a rank's data never waits for a header's trip.
            primitives.beforeFirstReceive(() -> checkPredecessorsHeader(mine, outerCall));
            // Half of what may be in flight towards the successor: a sender never needs more before it
            // receives (the header's frame, sent with the first chunk, fits in the other half).
            long chunkBytes = Math.max(type.size(), primitives.capacityBytes() / 2);
            work.run(primitives, chunkBytes / type.size());
            primitives.finish();
            completedCalls = mine.sequence;
        } catch (RuntimeException e) {
            primitives.settle(); // the caller's memory is its own again before the error reaches it
            abort(e);
            throw e;
        }
    }

    /**
     * A small all-reduce by recursive doubling ({@link RecursiveDoubling}): the same header, checks
     * and failure handling as {@link #run}, the headers travelling on every frame instead of round
     * the ring.
     */
    private void runSmall(long send, long recv, long count, DataType type, ReduceOp op) {
        ensureUsable();
        CollectiveHeader mine = new CollectiveHeader(++sequence, Kind.ALL_REDUCE, type, op, Protocol.SIMPLE, 0, count);
        if (log.infoEnabled(Subsys.COLL)) {
            log.info(Subsys.COLL, "%s over TCP, recursive doubling", mine.describe());
        }
        try {
            // While it waits for a partner, a predecessor that runs this call over the ring (so another
            // call: the choice follows from the call) fails it, as the header check on the ring would.
            ring.beginCall(mine.sequence);
            wait.startCollective(mine, (peer, step, what) -> checkRingPredecessor(mine));
            CollectiveHeader outerCall = outer;
            outer = null;
            writeHeaders(mine, outerCall);
            small.allReduce(mine.sequence, headerScratch, send, recv, count, type, op, (from, bytes) ->
                    checkPartnersHeader(mine, outerCall, from, bytes));
            completedCalls = mine.sequence;
        } catch (RuntimeException e) {
            abort(e);
            throw e;
        }
    }

    private void writeHeaders(CollectiveHeader mine, CollectiveHeader outerCall) {
        int h = CollectiveHeader.BYTES;
        mine.write(headerScratch);
        if (outerCall != null) {
            outerCall.write(headerScratch + h);
        } else {
            UnsafeApi.setMemory(headerScratch + h, h, (byte) 0);
        }
    }

    /** Fails if the predecessor's next collective over the ring has arrived and is this rank's call by its number. */
    private void checkRingPredecessor(CollectiveHeader mine) {
        long at = primitives.peekHeader(2 * CollectiveHeader.BYTES);
        if (at != 0) {
            CollectiveHeader theirs = CollectiveHeader.read(at);
            if (theirs == null || theirs.sequence == mine.sequence) {
                throw mismatch(mine.describe() + " (recursive doubling)", theirs == null ? "something unreadable"
                        : theirs.describe() + " (over the ring)");
            }
        }
    }

    /** Fails if a partner's frame is of another call (or of this call's size but another length) than this rank's. */
    private void checkPartnersHeader(CollectiveHeader mine, CollectiveHeader outerCall, DirectLink from, int bytes) {
        int h = CollectiveHeader.BYTES;
        long at = from.headersAddress();
        CollectiveHeader theirs = CollectiveHeader.read(at);
        String partner = "rank " + from.peer + " (its partner in the recursive-doubling all-reduce over TCP)";
        if (!mine.sameCall(theirs)) {
            throw mismatch(mine.describe(), partner, theirs == null ? "something unreadable" : theirs.describe());
        }
        if (!CollectiveHeader.sameBytes(headerScratch + h, at + h)) {
            CollectiveHeader theirOuter = CollectiveHeader.read(at + h);
            throw mismatch(outerCall == null ? "a collective of this communicator" : "two-level " + outerCall.describe(),
                    partner, theirOuter == null ? "a collective of its own communicator" : "two-level " + theirOuter.describe());
        }
        if (from.bodyBytes() != bytes) {
            throw new CclException("rank " + group[rank] + ": " + from.peerName + " sent " + from.bodyBytes() + " bytes"
                    + " of " + mine.describe() + " where this rank expected " + bytes + ": the ranks run different"
                    + " collectives; every rank must make the same calls, in the same order, with the same count and type");
        }
    }

    /** Receives the predecessor's two headers (this call's, the outer call's) and fails if they differ from this rank's. */
    private void checkPredecessorsHeader(CollectiveHeader mine, CollectiveHeader outerCall) {
        int h = CollectiveHeader.BYTES;
        primitives.recvHeader(headerScratch + 2L * h, 2 * h);
        CollectiveHeader theirs = CollectiveHeader.read(headerScratch + 2L * h);
        if (!mine.sameCall(theirs)) {
            throw mismatch(mine.describe(), theirs == null ? "something unreadable" : theirs.describe());
        }
        if (!CollectiveHeader.sameBytes(headerScratch + h, headerScratch + 3L * h)) {
            CollectiveHeader theirOuter = CollectiveHeader.read(headerScratch + 3L * h);
            throw mismatch(outerCall == null ? "a collective of this communicator" : "two-level " + outerCall.describe(),
                    theirOuter == null ? "a collective of its own communicator" : "two-level " + theirOuter.describe());
        }
    }

    /**
     * The two-level call that this rank's next collective here is part of: sent round the ring with
     * that collective's own header and compared too, so that hosts whose calls differ fail even
     * where the parts they run here happen to match.
     */
    public void partOf(CollectiveHeader outerCall) {
        this.outer = outerCall;
    }

    private CclException mismatch(String mine, String theirs) {
        return mismatch(mine, "rank " + ring.prev + " (its ring predecessor over TCP)", theirs);
    }

    private CclException mismatch(String mine, String who, String theirs) {
        return new CclException("rank " + group[rank] + ": collective mismatch: this rank called " + mine + " but "
                + who + " called " + theirs + "; every rank must make the same collective calls, in the same order,"
                + " with the same count, type and op");
    }

    private int[] identity() {
        int[] ring = new int[size];
        for (int i = 0; i < size; i++) {
            ring[i] = i;
        }
        return ring;
    }

    private void ensureUsable() {
        ensureUsable(rank, closed, brokenBy);
    }

    /** Throws where a communicator of this package is closed, or broken by an earlier failure ({@code brokenBy}). */
    static void ensureUsable(int rank, boolean closed, String brokenBy) {
        if (closed) {
            throw new CclException("rank " + rank + ": communicator is closed");
        }
        if (brokenBy != null) {
            throw new CclException("rank " + rank + ": communicator is unusable after an earlier failure (" + brokenBy
                    + "); close it and build a new one");
        }
    }

    static void checkRoot(int rank, int root, int size) {
        if (root < 0 || root >= size) {
            throw new IllegalArgumentException("rank " + rank + ": broadcast root " + root + " is not a rank of 0.." + (size - 1));
        }
    }

    @Override
    public void abort(String reason) {
        if (!closed) {
            abort(new CclException("rank " + rank() + ": " + reason));
        }
    }

    /**
     * Marks this communicator failed and tells the ring, after the data already sent, why: each rank
     * then fails in turn with this message instead of waiting for its timeout. The abort says how
     * many collectives this rank completed: a peer still in the last of them finishes it and fails
     * at its next call (Spark kills a task between collectives; the others' last call stands).
     */
    public void abort(RuntimeException cause) {
        if (brokenBy != null) {
            return;
        }
        brokenBy = String.valueOf(cause.getMessage());
        if (ring != null) {
            int origin = cause instanceof PeerFailedException ? ((PeerFailedException) cause).failedRank() : group[rank];
            long completed = completedCalls;
            ring.abort(origin, completed, brokenBy);
            if (small != null) {
                small.abort(origin, completed, brokenBy);
            }
        }
    }

    /** Off-heap bytes of every socket link in this JVM not closed yet: tests assert it returns to 0. */
    public static long outstandingBytesInJvm() {
        return SocketLink.outstandingBytes();
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        try {
            if (small != null) {
                small.close();
            }
            if (ring != null) {
                ring.close();
            }
        } finally {
            UnsafeApi.freeMemory(headerScratch);
        }
    }
}
