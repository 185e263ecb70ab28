package org.sparkccl.core.net;

import org.sparkccl.core.bootstrap.CommunicatorBootstrap;
import java.util.List;
import java.util.function.BooleanSupplier;
import java.util.function.IntFunction;
import org.sparkccl.core.CclException;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.DataType;
import org.sparkccl.core.shm.ShmCommunicator;
import org.sparkccl.core.memory.HostStagingBuffer;
import org.sparkccl.core.MemoryKind;
import org.sparkccl.core.PeerFailedException;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.SharedBuffer;
import org.sparkccl.core.StagingBuffer;
import org.sparkccl.core.copy.BulkCopy;
import org.sparkccl.core.log.CclLog;
import org.sparkccl.core.log.Subsys;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.proto.CollectiveHeader;
import org.sparkccl.core.proto.CollectiveHeader.Kind;
import org.sparkccl.core.proto.Protocol;
import org.sparkccl.core.transport.MemoryTransport;
import org.sparkccl.core.transport.RankInfo;

/**
 * Ranks on several hosts, the same number L on each: a shared-memory communicator among the ranks
 * of each host ({@link ShmCommunicator}) and, across hosts, one TCP ring per local index l joining
 * the l-th rank of every host ({@link SocketCommunicator}). An all-reduce is a reduce-scatter inside
 * the host (each local rank ends with 1/L of the host's sum), an all-reduce of that shard across
 * hosts, and an all-gather inside the host: each byte crosses the network once per direction and
 * link, and the L rings share the links between hosts. The other collectives compose the two levels.
 */
public final class TwoLevelCommunicator implements Communicator {
    /** The ring tags of a two-level layout: the host's ranks' bootstrap ring, and the cross-host rings. */
    public static final int TAG_LOCAL_BOOTSTRAP = 1;
    public static final int TAG_CROSS = 2;
    private final int rank;
    private final int size;
    /** byHost[h][l]: the global rank of host h's l-th rank. */
    private final int[][] byHost;
    private final int host;
    private final int local;
    private final ShmCommunicator inside;
    private final SocketCommunicator across;
    private final CclLog log;
    private int sequence;
    private String brokenBy;
    private boolean closed;

    private TwoLevelCommunicator(int rank, int[][] byHost, int host, int local, ShmCommunicator inside,
                                 SocketCommunicator across, CclLog log) {
        this.rank = rank;
        this.size = byHost.length * byHost[0].length;
        this.byHost = byHost;
        this.host = host;
        this.local = local;
        this.inside = inside;
        this.across = across;
        this.log = log;
    }

    /**
     * Builds both levels: a TCP ring among this host's ranks carries the bootstrap round of their
     * shared-memory communicator (the real round is spent), then the cross-host ring of this rank's
     * local index. {@code byHost} lists each host's global ranks; this rank is among them.
     */
    public static TwoLevelCommunicator create(SocketListener listener, RankInfo[] all, int rank, int[][] byHost,
                                       IntFunction<List<MemoryTransport>> transports, Params params,
                                       BooleanSupplier cancelled) {
        int host = -1;
        int local = -1;
        for (int h = 0; h < byHost.length; h++) {
            for (int l = 0; l < byHost[h].length; l++) {
                if (byHost[h][l] == rank) {
                    host = h;
                    local = l;
                }
            }
        }
        ShmCommunicator inside;
        try (SocketCommunicator bootstrapRing = SocketCommunicator.create(listener, all, rank, byHost[host],
                TAG_LOCAL_BOOTSTRAP, params, cancelled)) {
            inside = ShmCommunicator.create(new CommunicatorBootstrap(bootstrapRing), transports.apply(local), params,
                    cancelled);
        }
        int[] crossGroup = new int[byHost.length];
        for (int h = 0; h < byHost.length; h++) {
            crossGroup[h] = byHost[h][local];
        }
        SocketCommunicator across;
        try {
            across = SocketCommunicator.create(listener, all, rank, crossGroup, TAG_CROSS, params, cancelled);
        } catch (RuntimeException e) {
            inside.abortWith(e);
            inside.close();
            throw e;
        }
        CclLog log = new CclLog(rank, params);
        log.info(Subsys.INIT, "two-level: host %d of %d, local rank %d of %d; all-reduce = reduce-scatter over shared"
                        + " memory, all-reduce of the shard across hosts over TCP (ring of local rank %d: %s),"
                        + " all-gather over shared memory", host, byHost.length, local, byHost[host].length, local,
                java.util.Arrays.toString(crossGroup));
        return new TwoLevelCommunicator(rank, byHost, host, local, inside, across, log);
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
        return "two-level: " + byHost.length + " hosts x " + byHost[0].length + " ranks, " + inside.layoutInside()
                + " inside, TCP across";
    }

    @Override
    public void allReduce(long send, long recv, long count, DataType type, ReduceOp op) {
        CollectiveHeader call = start(Kind.ALL_REDUCE, type, op, 0, count);
        try {
            checkInside(call);
            TwoLevelSchedule.allReduce(inside, this::inHost,
                    (data, n, t, o) -> TwoLevelSchedule.acrossHosts(across, call, data, n, t, o, size),
                    byHost[0].length, local, send, recv, count, type, op, "two-level", log);
        } catch (RuntimeException e) {
            abort(e);
            throw inCall(e, "allReduce (count " + count + ", " + type.ncclName() + ", " + op.ncclName() + ")");
        }
    }

    /** {@code e} with the two-level call it broke in front: the levels' messages name their own parts of it. */
    private RuntimeException inCall(RuntimeException e, String call) {
        String message = "rank " + rank + ": two-level " + call + " failed: " + e.getMessage();
        return e instanceof PeerFailedException ? new PeerFailedException(((PeerFailedException) e).failedRank(), message, e)
                : e.getClass() == CclException.class ? new CclException(message, e) : e;
    }

    @Override
    public void reduceScatter(long send, long recv, long recvCount, DataType type, ReduceOp op) {
        int es = type.size();
        try (HostStagingBuffer all = new HostStagingBuffer(Math.max(1, recvCount * size * es))) {
            allReduce(send, all.address(), recvCount * size, type, op);
            copy(all.address() + rank * recvCount * es, recv, recvCount * es);
        }
    }

    @Override
    public void allGather(long send, long recv, long sendCount, DataType type) {
        CollectiveHeader call = start(Kind.ALL_GATHER, type, ReduceOp.SUM, 0, sendCount);
        int perHost = byHost[0].length;
        long block = sendCount * type.size();
        try (HostStagingBuffer hostBlocks = new HostStagingBuffer(Math.max(1, block * perHost));
             HostStagingBuffer allBlocks = new HostStagingBuffer(Math.max(1, block * size))) {
            checkInside(call);
            inHost(() -> inside.allGather(send, hostBlocks.address(), sendCount, type));
            across.partOf(call);
            across.allGather(hostBlocks.address(), allBlocks.address(), sendCount * perHost, type);
            for (int h = 0; h < byHost.length; h++) {
                for (int l = 0; l < perHost; l++) {
                    copy(allBlocks.address() + (h * perHost + l) * block, recv + byHost[h][l] * block, block);
                }
            }
        } catch (RuntimeException e) {
            abort(e);
            throw e;
        }
    }

    @Override
    public void broadcast(long send, long recv, long count, DataType type, int root) {
        SocketCommunicator.checkRoot(rank, root, size);
        CollectiveHeader call = start(Kind.BROADCAST, type, ReduceOp.SUM, root, count);
        try {
            checkInside(call);
            for (int h = 0; h < byHost.length; h++) {
                for (int l = 0; l < byHost[h].length; l++) {
                    if (byHost[h][l] == root) {
                        if (h == host) {
                            int localRoot = l;
                            inHost(() -> inside.broadcast(send, recv, count, type, localRoot));
                        }
                        across.partOf(call);
                        across.broadcast(recv, recv, count, type, h);
                        return;
                    }
                }
            }
        } catch (RuntimeException e) {
            abort(e);
            throw e;
        }
    }

    @Override
    public void barrier() {
        CollectiveHeader call = start(Kind.BARRIER, DataType.INT32, ReduceOp.SUM, 0, 1);
        try {
            // Everyone of this host (checkInside is a collective there), then everyone of this local
            // index on every host: then everyone.
            checkInside(call);
            across.partOf(call);
            across.barrier();
        } catch (RuntimeException e) {
            abort(e);
            throw e;
        }
    }

    /**
     * Memory that the ranks of this host map (collective among them; every host allocates at the
     * same point): gradient buffers can live there as on one host, though the all-reduce here does
     * not read peers' buffers in place.
     */
    @Override
    public SharedBuffer allocateShared(long bytes) {
        ensureUsable();
        try {
            return inside.allocateShared(bytes);
        } catch (RuntimeException e) {
            abort(e);
            throw e;
        }
    }

    @Override
    public boolean canAllocateShared() {
        return inside.canAllocateShared();
    }

    @Override
    public StagingBuffer allocateStaging(long bytes) {
        return new HostStagingBuffer(bytes);
    }

    private CollectiveHeader start(Kind kind, DataType type, ReduceOp op, int root, long count) {
        ensureUsable();
        if (count < 0) {
            throw new IllegalArgumentException("rank " + rank + ": negative element count " + count);
        }
        return new CollectiveHeader(++sequence, kind, type, op, Protocol.SIMPLE, root, count);
    }

    private void checkInside(CollectiveHeader call) {
        inHost(() -> HostCallCheck.check(inside, call, rank, byHost[host]));
    }

    private static void copy(long from, long to, long bytes) {
        if (from != to && bytes > 0) {
            BulkCopy.copy(from, to, bytes);
        }
    }

    private void ensureUsable() {
        SocketCommunicator.ensureUsable(rank, closed, brokenBy);
    }

    /**
     * A call of the shared-memory level, its failure renumbered: that engine numbers ranks by local
     * index, and its abort origins are local indices, or -1 - g for a global rank g that this class
     * passed down ({@link #abort}).
     */
    private void inHost(Runnable call) {
        try {
            call.run();
        } catch (PeerFailedException e) {
            int failed = e.failedRank();
            if (failed < 0) {
                throw new PeerFailedException(-1 - failed, e.getMessage(), e); // its message names global ranks
            }
            int global = failed < byHost[host].length ? byHost[host][failed] : failed;
            throw new PeerFailedException(global, "rank " + rank + ", on host " + host + " where local rank " + failed
                    + " is rank " + global + " (local ranks numbered as " + java.util.Arrays.toString(byHost[host])
                    + "): " + e.getMessage(), e);
        }
    }

    @Override
    public void abort(String reason) {
        if (!closed) {
            abort(new CclException("rank " + rank() + ": " + reason));
        }
    }

    /**
     * One level failed (errors here name global ranks): the other level's peers, who may be waiting
     * on this rank there, learn it too.
     */
    private void abort(RuntimeException e) {
        if (brokenBy == null) {
            brokenBy = String.valueOf(e.getMessage());
            inside.abortWith(e instanceof PeerFailedException
                    ? new PeerFailedException(-1 - ((PeerFailedException) e).failedRank(), e.getMessage(), e)
                    : e);
            across.abort(e);
        }
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        try {
            across.close();
        } finally {
            inside.close();
        }
    }
}
