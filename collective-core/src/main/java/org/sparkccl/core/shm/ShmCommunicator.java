package org.sparkccl.core.shm;

import org.sparkccl.core.Bootstrap;
import org.sparkccl.core.CclException;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.DataType;
import org.sparkccl.core.MemoryKind;
import org.sparkccl.core.PeerFailedException;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.SharedBuffer;
import org.sparkccl.core.StagingBuffer;
import org.sparkccl.core.memory.HostStagingBuffer;
import org.sparkccl.core.jdk.JdkAccess;
import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.function.BooleanSupplier;
import org.agrona.UnsafeApi;
import org.agrona.concurrent.AtomicBuffer;
import org.sparkccl.core.copy.BulkCopy;
import org.sparkccl.core.log.CclLog;
import org.sparkccl.core.log.Subsys;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.warmup.WarmUp;
import org.sparkccl.core.proto.ChannelLayout;
import org.sparkccl.core.proto.CollectiveHeader;
import org.sparkccl.core.proto.CollectiveHeader.Kind;
import org.sparkccl.core.proto.Connection;
import org.sparkccl.core.direct.DirectAllReduce;
import org.sparkccl.core.direct.SharedBufferRegistry;
import org.sparkccl.core.oneshot.OneShotAllReduce;
import org.sparkccl.core.proto.LlPrimitives;
import org.sparkccl.core.proto.OneShotLayout;
import org.sparkccl.core.proto.Primitives;
import org.sparkccl.core.proto.Protocol;
import org.sparkccl.core.proto.SegmentLayout;
import org.sparkccl.core.proto.SimplePrimitives;
import org.sparkccl.core.ring.RingCollectives;
import org.sparkccl.core.topo.Ring;
import org.sparkccl.core.transport.ExposedRegion;
import org.sparkccl.core.transport.MemoryTransport;
import org.sparkccl.core.transport.RankInfo;
import org.sparkccl.core.transport.SharedRegion;
import org.sparkccl.core.tune.Tuner;
import org.sparkccl.core.wait.FailureCheck;
import org.sparkccl.core.transport.PeerMonitor;
import org.sparkccl.core.wait.WaitLoop;

/**
 * The CPU engine: ranks on one host share memory (a region per rank, see {@link SegmentLayout})
 * and run the ring collectives with Java code over it. Built with one bootstrap round: each rank
 * exposes its region before the round and opens its peers' after it.
 */
public final class ShmCommunicator implements Communicator {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    static final String ENTRY_TRANSPORT = "host.transport";
    static final String ENTRY_REGION = "host.region";
    static final String ENTRY_LAYOUT = "host.layout";
    /** Sent instead of a region by a rank that could not create its memory: why. */
    static final String ENTRY_ERROR = "host.error";
    /** Present where this rank's JVM has warmed a ShmCommunicator up already (WarmUp.doneInThisJvm). */
    static final String ENTRY_WARM = "host.warm";
    private static final long CHANNEL_ALIGN_BYTES = 64;
    /** Busy-wait polls before yielding when ranks outnumber cores: see {@link #spinsBeforeYield}. */
    static final int OVERSUBSCRIBED_SPINS = 20;

    private final int rank;
    private final int size;
    private final CclLog log;
    private final Tuner tuner;
    private final List<AutoCloseable> resources = new ArrayList<>();
    private final List<MemoryTransport> transports;
    /** {@link #layout()}: set once connected. */
    private String layoutText = "one rank";
    private String exposingName = "SHM";
    private ExposedRegion own;
    private SharedRegion[] regions;
    private Channel[] channels = new Channel[0];
    private ExecutorService channelThreads;
    private OneShotAllReduce oneShot;
    private DirectAllReduce direct;
    private SharedBufferRegistry registry;
    private final AlgorithmCrossCheck crossCheck = new AlgorithmCrossCheck();
    private int sequence;
    private String brokenBy;
    private boolean closed;
    /** Every rank's JVM has run the warm-up before: this communicator skips it (decided from the bootstrap round). */
    private boolean everyRankWarm;
    /** Watches the peers' control blocks; null until connected (and for a single rank). */
    private PeerMonitor monitor;

    /** One channel's connection, its two protocols and its own wait loop (channels run on their own threads). */
    private static final class Channel {
        final WaitLoop wait;
        final LlPrimitives ll;
        final SimplePrimitives simple;
        final long headerScratch;
        /** This channel's ring: neighbours, and where each rank stands in it. */
        final Ring ring;
        final int[] order;

        Channel(Connection connection, Ring ring) {
            this.ring = ring;
            this.order = ring.order();
            this.wait = connection.waitLoop();
            this.ll = new LlPrimitives(connection);
            this.simple = new SimplePrimitives(connection);
            this.headerScratch = UnsafeApi.allocateMemory(2L * CollectiveHeader.BYTES);
        }

        void close() {
            ll.close();
            simple.close();
            UnsafeApi.freeMemory(headerScratch);
        }
    }

    /** What one channel does for one collective, given its primitives and which of {@code active} channels it is. */
    @FunctionalInterface
    private interface ChannelWork {
        void run(Primitives p, int channel, int active);
    }

    private ShmCommunicator(Bootstrap bootstrap, List<MemoryTransport> transports, Params params) {
        this.transports = List.copyOf(transports);
        this.rank = bootstrap.rank();
        this.size = bootstrap.size();
        this.log = new CclLog(rank, params);
        int requested = params.get(Params.NCHANNELS);
        this.tuner = new Tuner(params, requested > 0 ? requested : 1);
    }

    public static ShmCommunicator create(Bootstrap bootstrap, List<MemoryTransport> transports, Params params) {
        return create(bootstrap, transports, params, () -> false);
    }

    /**
     * Builds the communicator: exactly one {@code allGather} on the bootstrap, every rank together.
     * The communicator owns {@code transports} (in order of preference) and closes them with itself.
     * {@code cancelled} is polled while waiting (Spark passes its task-killed flag).
     */
    public static ShmCommunicator create(Bootstrap bootstrap, List<MemoryTransport> transports, Params params,
                                          BooleanSupplier cancelled) {
        ShmCommunicator comm = new ShmCommunicator(bootstrap, transports, params);
        try {
            comm.connect(bootstrap, transports, params, cancelled);
            if (!comm.everyRankWarm) {
                WarmUp.run(comm, params, comm.log);
            }
            return comm;
        } catch (RuntimeException e) {
            comm.abort(e);
            comm.close();
            throw e;
        }
    }

    /** Whether this communicator skipped its warm-up because every rank's JVM had run one (tests). */
    boolean skippedWarmUp() {
        return everyRankWarm;
    }

    private void connect(Bootstrap bootstrap, List<MemoryTransport> transports, Params params, BooleanSupplier cancelled) {
        for (String line : params.describeSet()) {
            log.info(Subsys.INIT, "%s", line);
        }
        int nch = params.get(Params.NCHANNELS) > 0 ? params.get(Params.NCHANNELS) : 1;
        SegmentLayout layout = new SegmentLayout(
                new ChannelLayout(params.get(Params.LL_BUFFSIZE), params.get(Params.BUFFSIZE)), nch,
                new OneShotLayout(tuner.oneShotSlotBytes()), true);
        RankInfo me = RankInfo.local(rank, size);
        MemoryTransport exposing = size > 1 || transports.stream().anyMatch(t -> t.unavailableReason() == null)
                ? chooseExposingTransport(transports) : null;
        RuntimeException exposeFailure = null;
        if (size > 1) {
            try {
                own = exposing.expose(layout.totalBytes(), "rank " + rank);
            } catch (RuntimeException e) {
                // Still take part in the exchange, with the error instead of a region: the other ranks
                // then fail at once naming this rank, instead of waiting for it until the bootstrap times out.
                exposeFailure = e;
                me = me.withEntry(ENTRY_ERROR, String.valueOf(e.getMessage()).getBytes(StandardCharsets.UTF_8));
            }
        }
        if (size > 1 && exposeFailure == null) {
            AtomicBuffer control = own.buffer();
            control.putLong(SegmentLayout.MAGIC_OFFSET, SegmentLayout.MAGIC);
            control.putInt(SegmentLayout.VERSION_OFFSET, SegmentLayout.VERSION);
            control.putLong(SegmentLayout.PID_OFFSET, me.pid());
            control.putIntVolatile(SegmentLayout.STATE_OFFSET, SegmentLayout.STATE_RUNNING);
            me = me.withEntry(ENTRY_TRANSPORT, exposing.name().getBytes(java.nio.charset.StandardCharsets.UTF_8))
                    .withEntry(ENTRY_REGION, own.connectBlob())
                    .withEntry(ENTRY_LAYOUT, encodeLayout(layout));
            log.info(Subsys.INIT, "exposed %d bytes via %s (%d channel(s), LL slot %d B, Simple slot %d B)",
                    layout.totalBytes(), exposing.name(), nch, layout.channel().llSlotBytes(),
                    layout.channel().simpleSlotBytes());
        }

        if (size > 1) {
            me = ShmRingFacts.describe(me, params, log);
            if (WarmUp.doneInThisJvm(ShmCommunicator.class)) {
                me = me.withEntry(ENTRY_WARM, new byte[] {1});
            }
            exposingName = exposing.name();
            layoutText = "one host: " + size + " ranks, " + exposingName;
        }
        byte[][] gathered = bootstrap.allGather(me.encode());
        if (exposeFailure != null) {
            throw exposeFailure;
        }
        if (size == 1 && exposing != null) {
            registry = new SharedBufferRegistry(rank, size, exposing, new MemoryTransport[] {exposing},
                    new RankInfo[] {me}, log);
        }
        if (size == 1) {
            log.info(Subsys.INIT, "single rank: collectives are local copies");
            return;
        }
        RankInfo[] infos = new RankInfo[size];
        boolean allWarm = true;
        for (int r = 0; r < size; r++) {
            infos[r] = RankInfo.decode(gathered[r], r, size);
            allWarm &= infos[r].entry(ENTRY_WARM) != null;
            byte[] theirError = infos[r].entry(ENTRY_ERROR);
            if (theirError != null) {
                throw new PeerFailedException(r, "rank " + rank + ": rank " + r + " could not create its shared memory,"
                        + " so this communicator cannot be built: " + new String(theirError, StandardCharsets.UTF_8));
            }
            byte[] theirLayout = infos[r].entry(ENTRY_LAYOUT);
            if (theirLayout == null || !java.util.Arrays.equals(theirLayout, encodeLayout(layout))) {
                throw new CclException("rank " + rank + ": rank " + r + " uses different buffers or channel count than this"
                        + " rank; set SPARKCCL_NCHANNELS, SPARKCCL_BUFFSIZE and SPARKCCL_LL_BUFFSIZE alike on every rank");
            }
        }

        everyRankWarm = allWarm;
        regions = new SharedRegion[size];
        AtomicBuffer[] controls = new AtomicBuffer[size];
        MemoryTransport[] peerTransports = new MemoryTransport[size];
        regions[rank] = own;
        controls[rank] = own.buffer();
        peerTransports[rank] = exposing;
        for (int p = 0; p < size; p++) {
            if (p == rank) {
                continue;
            }
            peerTransports[p] = transportFor(transports, me, infos[p]);
            regions[p] = peerTransports[p].open(infos[p].entry(ENTRY_REGION), infos[p]);
            resources.add(regions[p]);
            AtomicBuffer control = regions[p].buffer();
            SegmentLayout.FORMAT.checkHeader(control.getLong(SegmentLayout.MAGIC_OFFSET),
                    control.getInt(SegmentLayout.VERSION_OFFSET), "rank " + p + " (opened by rank " + rank + ")");
            control.getAndAddLong(SegmentLayout.ATTACHED_OFFSET, 1);
            controls[p] = control;
        }

        MemoryTransport[] cleanup = peerTransports;
        monitor = new PeerMonitor(rank, infos, controls, pid -> {
            for (MemoryTransport t : cleanup) {
                if (t != null) {
                    t.cleanUpAfter(pid);
                }
            }
        });
        int spins = spinsBeforeYield(params, size);
        long timeoutMs = params.get(Params.TIMEOUT_MS);

        // Once every peer has the region open, its name can go: nothing is left behind if a process dies later.
        WaitLoop initWait = new WaitLoop(rank, spins, timeoutMs, monitor, cancelled);
        initWait.startCollective("communicator init");
        while (own.buffer().getLongVolatile(SegmentLayout.ATTACHED_OFFSET) < size - 1) {
            initWait.idle(-1, 0, "peers to open this rank's memory");
        }
        own.unlinkName();

        List<Ring> rings = ShmRingFacts.rings(infos, rank, nch, params, log);
        channels = new Channel[nch];
        log.info(Subsys.SHM, "bulk copies: %s", BulkCopy.describe());
        for (int c = 0; c < nch; c++) {
            int next = rings.get(c).next(rank);
            int prev = rings.get(c).prev(rank);
            log.info(Subsys.INIT, "Channel %02d : %d[%d] -> %d[%d] via %s", c, rank, me.pid(), next, infos[next].pid(),
                    peerTransports[next].name());
            WaitLoop wait = new WaitLoop(rank, spins, timeoutMs, monitor, cancelled);
            Connection connection = new Connection(layout.channel(), own.buffer(), layout.channelOffset(c),
                    regions[next].buffer(), layout.channelOffset(c), prev, next, wait);
            channels[c] = new Channel(connection, rings.get(c));
        }
        if (layout.oneShot().slotDataBytes() > 0) {
            long[] areas = new long[size];
            for (int p = 0; p < size; p++) {
                areas[p] = regions[p].buffer().addressOffset() + layout.oneShotOffset();
            }
            oneShot = new OneShotAllReduce(rank, size, layout.oneShot(), areas, channels[0].wait);
        }
        registry = new SharedBufferRegistry(rank, size, exposing, peerTransports, infos, log);
        long[] directAreas = new long[size];
        for (int p = 0; p < size; p++) {
            directAreas[p] = regions[p].buffer().addressOffset() + layout.directOffset();
        }
        direct = new DirectAllReduce(rank, size, directAreas, registry, channels[0].wait);
        if (nch > 1) {
            channelThreads = Executors.newFixedThreadPool(nch - 1, r -> {
                Thread t = new Thread(r, "sparkccl-rank" + rank + "-channel");
                t.setDaemon(true);
                return t;
            });
        }
        log.info(Subsys.TUNING, "%s", tuner.describe());
        log.info(Subsys.INIT, "communicator ready: rank %d of %d", rank, size);
    }

    /**
     * {@code SPINS_BEFORE_YIELD} where set; else its default, or {@link #OVERSUBSCRIBED_SPINS} when
     * this host's ranks (all of them: the host engine runs on one host) outnumber its cores, where a
     * spinning rank holds the core a peer needs to make progress (as OpenMPI turns on
     * {@code mpi_yield_when_idle} when it sees more ranks than slots). Measured, 4 rank threads on 2
     * cores, direct all-reduce 256 KB - 16 MB: 3.8-6.0 GB/s busbw with 20 spins against 0.8-5.2
     * with 2000.
     */
    public static int spinsBeforeYield(Params params, int ranksOnHost) {
        if (params.isSet(Params.SPINS_BEFORE_YIELD) || ranksOnHost <= Runtime.getRuntime().availableProcessors()) {
            return params.get(Params.SPINS_BEFORE_YIELD);
        }
        return OVERSUBSCRIBED_SPINS;
    }

    private MemoryTransport chooseExposingTransport(List<MemoryTransport> transports) {
        StringBuilder why = new StringBuilder();
        for (MemoryTransport t : transports) {
            String reason = t.unavailableReason();
            if (reason == null) {
                return t;
            }
            why.append("; ").append(t.name()).append(": ").append(reason);
            log.info(Subsys.INIT, "transport %s unavailable: %s", t.name(), reason);
        }
        throw new CclException("rank " + rank + ": no transport can share memory here" + why);
    }

    private MemoryTransport transportFor(List<MemoryTransport> transports, RankInfo me, RankInfo peer) {
        String name = new String(peer.entry(ENTRY_TRANSPORT), java.nio.charset.StandardCharsets.UTF_8);
        for (MemoryTransport t : transports) {
            if (t.name().equals(name)) {
                String reason = t.cannotConnectReason(me, peer);
                if (reason == null) {
                    return t;
                }
                throw new CclException("rank " + rank + " cannot reach rank " + peer.rank() + " through " + name + ": "
                        + reason + " (ranks on different hosts need the socket transport, which this build lacks)");
            }
        }
        throw new CclException("rank " + rank + ": rank " + peer.rank() + " exposed its memory through " + name
                + ", which this rank does not have; run the same sparkccl build and settings on every rank");
    }

    private static byte[] encodeLayout(SegmentLayout layout) {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (DataOutputStream out = new DataOutputStream(bytes)) {
            out.writeInt(layout.channels());
            out.writeInt(layout.channel().llSlotBytes());
            out.writeInt(layout.channel().simpleSlotBytes());
            out.writeInt(layout.oneShot().slotDataBytes());
            out.writeBoolean(layout.direct());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return bytes.toByteArray();
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
        return layoutText;
    }

    /** The transport the ranks of this host share memory through (SHM, or LOCAL in one process): for a two-level layout. */
    public String layoutInside() {
        return exposingName;
    }

    @Override
    public void allReduce(long send, long recv, long count, DataType type, ReduceOp op) {
        checkCount(count);
        int es = type.size();
        if (size == 1) {
            copyIfApart(send, recv, count * es);
            return;
        }
        long bytes = count * es;
        if (direct != null && tuner.directAllReduce(bytes)) {
            int sendReg = registry.find(send, bytes);
            int recvReg = sendReg < 0 || send == recv ? sendReg : registry.find(recv, bytes);
            if (recvReg >= 0) {
                runDirect(send, sendReg, recv, recvReg, count, type, op);
                return;
            }
        }
        if (oneShot != null && tuner.oneShotAllReduce(bytes)) {
            runOneShot(send, recv, count, type, op);
            return;
        }
        run(Kind.ALL_REDUCE, type, op, 0, count, count * es, (p, c, active) -> {
            long[] slice = slice(count, es, c, active);
            RingCollectives.allReduce(p, send, recv, slice[0], slice[1], es, size, position(c), chunkElems(p, es));
        });
    }

    @Override
    public void reduceScatter(long send, long recv, long recvCount, DataType type, ReduceOp op) {
        checkCount(recvCount);
        int es = type.size();
        if (size == 1) {
            copyIfApart(send, recv, recvCount * es);
            return;
        }
        run(Kind.REDUCE_SCATTER, type, op, 0, recvCount, recvCount * es * size, (p, c, active) -> {
            long[] slice = slice(recvCount, es, c, active);
            RingCollectives.reduceScatter(p, send, recv, recvCount, slice[0], slice[1], es, channels[c].order, position(c),
                    chunkElems(p, es));
        });
    }

    @Override
    public void allGather(long send, long recv, long sendCount, DataType type) {
        checkCount(sendCount);
        int es = type.size();
        if (size == 1) {
            copyIfApart(send, recv, sendCount * es);
            return;
        }
        run(Kind.ALL_GATHER, type, ReduceOp.SUM, 0, sendCount, sendCount * es * size, (p, c, active) -> {
            long[] slice = slice(sendCount, es, c, active);
            RingCollectives.allGather(p, send, recv, sendCount, slice[0], slice[1], es, channels[c].order, position(c),
                    chunkElems(p, es));
        });
    }

    @Override
    public void broadcast(long send, long recv, long count, DataType type, int root) {
        checkCount(count);
        if (root < 0 || root >= size) {
            throw new IllegalArgumentException("rank " + rank + ": broadcast root " + root + " is not a rank of 0.." + (size - 1));
        }
        int es = type.size();
        if (size == 1) {
            copyIfApart(send, recv, count * es);
            return;
        }
        run(Kind.BROADCAST, type, ReduceOp.SUM, root, count, count * es, (p, c, active) -> {
            long[] slice = slice(count, es, c, active);
            RingCollectives.broadcast(p, send, recv, slice[0], slice[1], es, size, position(c),
                    channels[c].ring.positionOf(root), chunkElems(p, es));
        });
    }

    @Override
    public void barrier() {
        if (size == 1) {
            ensureUsable();
            return;
        }
        try (HostStagingBuffer token = new HostStagingBuffer(4)) {
            UnsafeApi.putInt(token.address(), 1);
            run(Kind.BARRIER, DataType.INT32, ReduceOp.SUM, 0, 1, 4, (p, c, active) ->
                    RingCollectives.allReduce(p, token.address(), token.address(), 0, 1, 4, size, position(c), 1));
        }
    }

    @Override
    public StagingBuffer allocateStaging(long bytes) {
        return new HostStagingBuffer(bytes);
    }

    @Override
    public SharedBuffer allocateShared(long bytes) {
        ensureUsable();
        if (registry == null) {
            throw new CclException("rank " + rank + ": no transport can share memory here, so there are no shared"
                    + " buffers; use allocateStaging");
        }
        try {
            return registry.allocate(bytes, new SharedBufferRegistry.Exchange() {
                @Override
                public byte[][] allGather(byte[] record) {
                    return gatherRecords(record);
                }

                @Override
                public void barrier() {
                    ShmCommunicator.this.barrier();
                }
            });
        } catch (RuntimeException e) {
            // A rank that fails after the exchange (opening a peer's memory) would leave the others
            // waiting in the barrier: the abort ends their wait with this error.
            abort(e);
            throw e;
        }
    }

    @Override
    public boolean canAllocateShared() {
        return registry != null;
    }

    /** The ring channel {@code channel} runs (logs, tests); null for a single rank. */
    public Ring ring(int channel) {
        return channel < channels.length ? channels[channel].ring : null;
    }

    /** Bytes of this rank's shared buffers ({@link #allocateShared}) that are not closed yet. */
    public long sharedBytes() {
        return registry == null ? 0 : registry.openBytes();
    }

    /** Every rank's fixed-size {@code record}, in rank order, through this communicator's allGather. */
    private byte[][] gatherRecords(byte[] record) {
        int n = record.length;
        try (HostStagingBuffer in = new HostStagingBuffer(n); HostStagingBuffer out = new HostStagingBuffer((long) n * size)) {
            in.copyIn(record, n);
            allGather(in.address(), out.address(), n, DataType.UINT8);
            byte[] all = new byte[n * size];
            out.copyOut(all, all.length);
            byte[][] records = new byte[size][];
            for (int r = 0; r < size; r++) {
                records[r] = java.util.Arrays.copyOfRange(all, r * n, (r + 1) * n);
            }
            return records;
        }
    }

    /** Reads the peers' shared buffers in place: see {@link DirectAllReduce}. */
    private void runDirect(long send, int sendReg, long recv, int recvReg, long count, DataType type, ReduceOp op) {
        CollectiveHeader mine = startAllReduce(Algorithm.DIRECT, Protocol.SIMPLE, count, type, op);
        boolean sendInUse = false;
        boolean recvInUse = false;
        try {
            // Held until the call returns, so that another thread cannot unmap the buffers under it.
            registry.startUse(sendReg, mine);
            sendInUse = true;
            if (recvReg != sendReg) {
                registry.startUse(recvReg, mine);
                recvInUse = true;
            }
            direct.allReduce(mine, send, sendReg, recv, recvReg);
        } catch (RuntimeException e) {
            abort(e);
            throw e;
        } finally {
            if (sendInUse) {
                registry.endUse(sendReg);
            }
            if (recvInUse) {
                registry.endUse(recvReg);
            }
        }
    }

    /** One exchange instead of a header and a ring: see {@link OneShotAllReduce}. */
    private void runOneShot(long send, long recv, long count, DataType type, ReduceOp op) {
        CollectiveHeader mine = startAllReduce(Algorithm.ONE_SHOT, Protocol.LL, count, type, op);
        try {
            oneShot.allReduce(mine, send, recv);
        } catch (RuntimeException e) {
            abort(e);
            throw e;
        }
    }

    /** The next all-reduce's header, for an algorithm that waits on channel 0's loop only. */
    private CollectiveHeader startAllReduce(Algorithm algorithm, Protocol protocol, long count, DataType type, ReduceOp op) {
        ensureUsable();
        CollectiveHeader mine = new CollectiveHeader(++sequence, Kind.ALL_REDUCE, type, op, protocol, 0, count);
        if (log.infoEnabled(Subsys.COLL)) {
            log.info(Subsys.COLL, "%s %s", mine.describe(), algorithm.how);
        }
        crossCheck.start(mine, algorithm);
        channels[0].wait.startCollective(mine, crossCheck);
        return mine;
    }

    /** Where an all-reduce's header goes, by algorithm: what {@link AlgorithmCrossCheck} looks at. */
    private enum Algorithm {
        RING("as a ring"), ONE_SHOT("one-shot"), DIRECT("direct on shared buffers");

        final String how;

        Algorithm(String how) {
            this.how = how;
        }
    }

    /**
     * The algorithms check headers in different places (one-shot: every peer's slot; direct: every
     * peer's direct area; ring: the predecessor's LL slot), so ranks that run the same call with
     * different algorithms (a count on either side of a threshold, buffers shared on one rank and
     * not on another, or settings that differ) would each wait where the other never writes. While
     * channel 0 waits, this looks where the other algorithms' headers would be and fails with both
     * calls named if a peer is there with this call's sequence number.
     */
    private final class AlgorithmCrossCheck implements FailureCheck {
        private final long scratch = UnsafeApi.allocateMemory(CollectiveHeader.BYTES);
        private CollectiveHeader mine;
        private Algorithm mineAlgorithm;

        void start(CollectiveHeader header, Algorithm algorithm) {
            this.mine = header;
            this.mineAlgorithm = algorithm;
        }

        @Override
        public void check(int awaitedPeer, long step, String waitingFor) {
            if (mineAlgorithm != Algorithm.RING && channels[0].ll.peekHeader(scratch)) {
                fail(channels[0].ring.prev(rank), Algorithm.RING);
            }
            for (int p = 0; p < size; p++) {
                if (p == rank) {
                    continue;
                }
                if (mineAlgorithm != Algorithm.ONE_SHOT && oneShot != null && oneShot.peekHeader(p, mine.sequence, scratch)) {
                    fail(p, Algorithm.ONE_SHOT);
                }
                if (mineAlgorithm != Algorithm.DIRECT && direct != null && direct.peekHeader(p, mine.sequence, scratch)) {
                    fail(p, Algorithm.DIRECT);
                }
            }
        }

        private void fail(int peer, Algorithm theirAlgorithm) {
            CollectiveHeader theirs = CollectiveHeader.read(scratch);
            if (theirs == null || theirs.sequence != mine.sequence) {
                return; // an older call's leftovers: not this call
            }
            throw new CclException("rank " + rank + ": collective mismatch: this rank called " + mine.describe()
                    + " " + mineAlgorithm.how + " but rank " + peer + " called " + theirs.describe()
                    + " " + theirAlgorithm.how + "; every rank must make the same collective calls, in the same order,"
                    + " with the same count, type and op, with buffers from allocateShared on every rank or on none,"
                    + " and the same SPARKCCL_ALGO, SPARKCCL_ONESHOT_THRESHOLD and SPARKCCL_DIRECT_THRESHOLD");
        }

        void close() {
            UnsafeApi.freeMemory(scratch);
        }
    }

    /** Runs one collective on its active channels: header check first, then the ring work. */
    private void run(Kind kind, DataType type, ReduceOp op, int root, long count, long bytes, ChannelWork work) {
        ensureUsable();
        int seq = ++sequence;
        Protocol protocol = tuner.protocol(bytes);
        int active = tuner.activeChannels(bytes);
        CollectiveHeader mine = new CollectiveHeader(seq, kind, type, op, protocol, root, count);
        if (log.infoEnabled(Subsys.COLL)) {
            log.info(Subsys.COLL, "%s on %d channel(s)", mine.describe(), active);
        }
        try {
            if (active == 1) {
                runChannel(0, active, mine, work);
            } else {
                runParallel(active, mine, work);
            }
        } catch (RuntimeException e) {
            abort(e);
            throw e;
        }
    }

    private void runParallel(int active, CollectiveHeader mine, ChannelWork work) {
        List<Future<?>> others = new ArrayList<>();
        for (int c = 1; c < active; c++) {
            int channel = c;
            others.add(channelThreads.submit(() -> runChannel(channel, active, mine, work)));
        }
        RuntimeException first = null;
        try {
            runChannel(0, active, mine, work);
        } catch (RuntimeException e) {
            first = e;
            abort(e); // wakes this rank's other channels
        }
        for (Future<?> f : others) {
            try {
                f.get();
            } catch (ExecutionException e) {
                RuntimeException cause = e.getCause() instanceof RuntimeException
                        ? (RuntimeException) e.getCause() : new CclException(e.getCause().toString(), e.getCause());
                if (first == null) {
                    first = cause;
                    abort(cause);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                if (first == null) {
                    first = new CclException("rank " + rank + ": interrupted while channels ran " + mine.describe());
                    abort(first);
                }
            }
        }
        if (first != null) {
            throw first;
        }
    }

    private void runChannel(int c, int active, CollectiveHeader mine, ChannelWork work) {
        Channel ch = channels[c];
        if (c == 0) {
            crossCheck.start(mine, Algorithm.RING);
            ch.wait.startCollective(mine, crossCheck);
        } else {
            ch.wait.startCollective(mine);
        }
        mine.write(ch.headerScratch);
        ch.ll.exchangeHeader(ch.headerScratch, ch.headerScratch + CollectiveHeader.BYTES);
        CollectiveHeader theirs = CollectiveHeader.read(ch.headerScratch + CollectiveHeader.BYTES);
        if (!mine.sameCall(theirs)) {
            throw new CclException("rank " + rank + ": collective mismatch: this rank called " + mine.describe()
                    + " but rank " + ch.ring.prev(rank) + " (its ring predecessor) called "
                    + (theirs == null ? "something unreadable" : theirs.describe())
                    + "; every rank must make the same collective calls, in the same order, with the same count, type and op");
        }
        Primitives p = mine.protocol == Protocol.LL ? ch.ll : ch.simple;
        p.begin(mine.type, mine.op, size);
        work.run(p, c, active);
    }

    /** Elements per ring chunk: two Simple slots (so a sender runs ahead), or one LL slot. */
    private long chunkElems(Primitives p, int esize) {
        long bytes = p instanceof LlPrimitives ? ((LlPrimitives) p).slotDataBytes() : 2L * simpleSlotBytes();
        return Math.max(1, bytes / esize);
    }

    private int simpleSlotBytes() {
        return channels[0].simple.slotBytes();
    }

    /** This channel's elements {@code [begin, end)} of {@code count}, cut at cache-line multiples. */
    private static long[] slice(long count, int esize, int channel, int active) {
        long align = Math.max(1, CHANNEL_ALIGN_BYTES / esize);
        long per = (count + active - 1) / active;
        per = (per + align - 1) / align * align;
        long begin = Math.min(count, channel * per);
        long end = Math.min(count, begin + per);
        return new long[] {begin, end};
    }

    /** Where this rank stands in channel {@code c}'s ring: the ring collectives index chunks by it. */
    private int position(int c) {
        return channels[c].ring.positionOf(rank);
    }

    private static void copyIfApart(long send, long recv, long bytes) {
        if (send != recv && bytes > 0) {
            BulkCopy.copy(send, recv, bytes);
        }
    }

    private void checkCount(long count) {
        if (count < 0) {
            throw new IllegalArgumentException("rank " + rank + ": negative element count " + count);
        }
    }

    private void ensureUsable() {
        if (closed) {
            throw new CclException("rank " + rank + ": communicator is closed");
        }
        if (brokenBy != null) {
            throw new CclException("rank " + rank + ": communicator is unusable after an earlier failure (" + brokenBy
                    + "); close it and build a new one");
        }
    }

    @Override
    public void abort(String reason) {
        if (closed) {
            return; // its control block is unmapped
        }
        RuntimeException failure = new CclException("rank " + rank + ": " + reason);
        if (monitor != null) {
            try {
                monitor.check(-1, sequence, "no collective (it was between collectives)");
            } catch (PeerFailedException e) {
                // A peer that failed before is the cause (Spark kills the rest of a barrier stage
                // because one task failed): peers that see this abort must name that rank.
                failure = new PeerFailedException(e.failedRank(), "rank " + rank + ": " + reason + "; before that: "
                        + e.getMessage(), e);
            } catch (CclException e) {
                return; // this rank aborted already
            }
        }
        abort(failure);
    }

    /** Marks this rank aborted so that every peer's waits end with this error instead of hanging. */
    private void abort(RuntimeException e) {
        if (brokenBy == null) {
            brokenBy = String.valueOf(e.getMessage());
        }
        if (own != null) {
            int origin = e instanceof PeerFailedException ? ((PeerFailedException) e).failedRank() : rank;
            PeerMonitor.markAborted(own.buffer(), origin, String.valueOf(e.getMessage()));
        }
    }

    /**
     * Marks this communicator failed with {@code cause}, as its own failures do, so that every peer's
     * wait ends with this error. For engines built on top of this one (the two-level all-reduce of
     * {@code org.sparkccl.core.net}) whose other level failed while these peers wait here.
     */
    public void abortWith(RuntimeException cause) {
        abort(cause);
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        if (own != null && brokenBy == null) {
            own.buffer().putIntVolatile(SegmentLayout.STATE_OFFSET, SegmentLayout.STATE_CLOSED);
        }
        if (channelThreads != null) {
            channelThreads.shutdownNow();
        }
        for (Channel ch : channels) {
            if (ch != null) {
                ch.close();
            }
        }
        crossCheck.close();
        if (direct != null) {
            direct.close();
        }
        RuntimeException first = null;
        List<AutoCloseable> all = new ArrayList<>();
        if (registry != null) {
            all.add(registry::closeAll);
        }
        all.addAll(resources);
        if (own != null) {
            all.add(own);
        }
        all.addAll(transports);
        for (AutoCloseable r : all) {
            try {
                r.close();
            } catch (Exception e) {
                if (first == null) {
                    first = new CclException("rank " + rank + ": closing the communicator failed: " + e.getMessage(), e);
                } else {
                    first.addSuppressed(e);
                }
            }
        }
        if (first != null) {
            throw first;
        }
    }
}
