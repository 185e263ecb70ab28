package org.sparkccl.ipc.gpu;

import java.util.Arrays;
import java.util.function.BooleanSupplier;
import jcuda.driver.JCudaDriver;
import org.sparkccl.core.CclException;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.DataType;
import org.sparkccl.core.MemoryKind;
import org.sparkccl.core.PeerFailedException;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.StagingBuffer;
import org.sparkccl.core.log.CclLog;
import org.sparkccl.core.log.Subsys;
import org.sparkccl.core.bootstrap.CommunicatorBootstrap;
import org.sparkccl.core.net.HostCallCheck;
import org.sparkccl.core.net.HostLayout;
import org.sparkccl.core.net.SocketCommunicator;
import org.sparkccl.core.net.SocketListener;
import org.sparkccl.core.net.TwoLevelCommunicator;
import org.sparkccl.core.net.TwoLevelSchedule;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.proto.CollectiveHeader;
import org.sparkccl.core.proto.CollectiveHeader.Kind;
import org.sparkccl.core.proto.Protocol;
import org.sparkccl.core.reduce.Reduction;
import org.sparkccl.core.transport.RankInfo;
import org.sparkccl.ipc.cuda.Cuda;
import org.sparkccl.ipc.cuda.CudaDevice;
import org.sparkccl.ipc.cuda.CudaStream;
import org.sparkccl.ipc.cuda.DeviceBuffer;
import org.sparkccl.ipc.cuda.PinnedHostBuffer;

/**
 * GPU ranks on several hosts, the same number L on each: a {@link GpuCommunicator} among the ranks of
 * each host (CUDA IPC or host-staged, as on one machine) and, across hosts, one TCP ring per local index
 * l joining the l-th rank of every host ({@link SocketCommunicator}, the host engines' transport). The
 * inter-host hop goes through pinned host memory: an all-reduce is a reduce-scatter on the host's GPUs
 * (each local rank ends with 1/L of the host's sum in its receive buffer), then, in pieces of
 * {@link #PIECE_BYTES}, a copy of that shard device -> pinned host on the GPU communicator's stream, an
 * all-reduce of the piece across hosts, and a copy back; then an all-gather on the host's GPUs. The
 * other collectives compose the two levels the same way.
 *
 * <p>Blocking calls only: the stream-ordered calls of {@link GpuCommunicator} are not offered across
 * hosts yet (the TCP hop runs on the host). A TCP ring among the host's ranks, made at construction to
 * carry the GPU communicator's bootstrap round, stays for the per-call check that the host's ranks made
 * the same call ({@link HostCallCheck}).
 */
public final class GpuTwoLevelCommunicator implements Communicator {
    /** Each pinned staging buffer (two) and half the device scratch: what one piece of the TCP hop moves. */
    static final long PIECE_BYTES = 8L << 20;
    private final int rank;
    private final int size;
    private final HostLayout layout;
    private final int[] hostRanks;
    private final int host;
    private final int local;
    private final CudaDevice device;
    private final CclLog log;
    private PinnedHostBuffer pinnedIn;
    private PinnedHostBuffer pinnedOut;
    private DeviceBuffer scratch;
    private SocketCommunicator hostRing;
    private GpuCommunicator inside;
    private SocketCommunicator across;
    private String links = "";
    private int sequence;
    private String brokenBy;
    private boolean closed;

    private GpuTwoLevelCommunicator(int rank, HostLayout layout, CudaDevice device, CclLog log) {
        this.rank = rank;
        this.layout = layout;
        this.size = layout.hosts() * layout.perHost();
        int[] place = layout.place(rank);
        this.host = place[0];
        this.local = place[1];
        this.hostRanks = layout.ranksOf(host);
        this.device = device;
        this.log = log;
    }

    /**
     * Builds both levels over {@code listener} (started), from the bootstrap round's descriptions
     * {@code all}: a TCP ring among this host's ranks carries the GPU communicator's bootstrap round (the
     * real round is spent), then the cross-host ring of this rank's local index. Collective: every rank.
     */
    static GpuTwoLevelCommunicator create(SocketListener listener, RankInfo[] all, int rank, HostLayout layout,
                                          int deviceOrdinal, Params params, BooleanSupplier cancelled) {
        if (!layout.even()) {
            throw new CclException("rank " + rank + ": the two-level GPU engine needs the same number of ranks on every"
                    + " host, got " + layout);
        }
        GpuTwoLevelCommunicator comm = new GpuTwoLevelCommunicator(rank, layout, CudaDevice.get(deviceOrdinal),
                new CclLog(rank, params));
        try {
            comm.connect(listener, all, deviceOrdinal, params, cancelled);
            return comm;
        } catch (RuntimeException e) {
            comm.abort(e);
            comm.close();
            throw e;
        }
    }

    private void connect(SocketListener listener, RankInfo[] all, int deviceOrdinal, Params params,
                         BooleanSupplier cancelled) {
        // Pinned and device memory first, before any rank of this process launches a kernel: such
        // allocations may wait for the whole GPU, and a kernel of another rank may wait for this one.
        String owner = "rank " + rank + " two-level";
        pinnedIn = PinnedHostBuffer.allocate(device, PIECE_BYTES, owner);
        pinnedOut = PinnedHostBuffer.allocate(device, PIECE_BYTES, owner);
        scratch = DeviceBuffer.allocate(device, 2 * PIECE_BYTES, owner);
        hostRing = SocketCommunicator.create(listener, all, rank, hostRanks, TwoLevelCommunicator.TAG_LOCAL_BOOTSTRAP,
                params, cancelled);
        inside = GpuCommunicator.create(new CommunicatorBootstrap(hostRing), deviceOrdinal, params, cancelled);
        int[] crossGroup = layout.crossGroup(local);
        across = SocketCommunicator.create(listener, all, rank, crossGroup, TwoLevelCommunicator.TAG_CROSS, params,
                cancelled);
        // Every rank of this host has its cross ring, so every rank of every host has built its GPU
        // communicator (each did so before its cross ring): from here on nobody allocates while a peer's
        // kernel may wait for it.
        hostRing.barrier();
        links = "host " + host + " of " + layout.hosts() + ", local rank " + local + " of " + hostRanks.length
                + "; inside: " + (hostRanks.length == 1 ? "one rank" : inside.describeLinks()) + "; across: ring "
                + Arrays.toString(crossGroup) + " over TCP through pinned host memory";
        log.info(Subsys.INIT, "two-level GPU: host %d of %d, local rank %d of %d; all-reduce = reduce-scatter on the"
                        + " host's GPUs (%s), shard device -> pinned host, all-reduce across hosts over TCP (ring of local"
                        + " rank %d: %s) in pieces of %d bytes, pinned host -> device, all-gather on the host's GPUs",
                host, layout.hosts(), local, hostRanks.length, hostRanks.length == 1 ? "one rank: a copy" : "P2P/IPC or"
                        + " staged, logged above", local, Arrays.toString(crossGroup), PIECE_BYTES);
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
        return MemoryKind.DEVICE;
    }

    @Override
    public String layout() {
        return layout.perHost() == 1 ? "one TCP ring through pinned host memory: " + size + " GPU ranks"
                : "two-level: " + layout.hosts() + " hosts x " + layout.perHost() + " GPU ranks, GPU engine inside,"
                        + " TCP across through pinned host memory";
    }

    /** The GPU this rank runs on. */
    public CudaDevice device() {
        return device;
    }

    /** The stream the GPU level and the pinned copies run on; copies that must order with them can use it. */
    public CudaStream stream() {
        return inside.stream();
    }

    /** How this rank is connected, for logs and benchmarks. */
    public String describeLinks() {
        return links;
    }

    // ---- Collectives. ------------------------------------------------------------------------------

    @Override
    public void allReduce(long send, long recv, long count, DataType type, ReduceOp op) {
        CollectiveHeader call = start(Kind.ALL_REDUCE, type, op, 0, count);
        try {
            checkInside(call);
            TwoLevelSchedule.allReduce(inside, this::inHost, (data, n, t, o) -> acrossInPieces(call, data, n, t, o),
                    hostRanks.length, local, send, recv, count, type, op, "two-level GPU", log);
        } catch (RuntimeException e) {
            throw failed(e, call);
        }
    }

    /**
     * All-reduces {@code count} elements of device memory at {@code data} on this rank's cross-host ring,
     * piece by piece through pinned memory (AVG: the sum, divided by the communicator's size, there).
     */
    private void acrossInPieces(CollectiveHeader call, long data, long count, DataType type, ReduceOp op) {
        int es = type.size();
        long piece = PIECE_BYTES / es;
        for (long at = 0; at < count; at += piece) {
            long n = Math.min(piece, count - at);
            long bytes = n * es;
            toHost(data + at * es, pinnedIn.address(), bytes);
            TwoLevelSchedule.acrossHosts(across, call, pinnedIn.address(), n, type, op, size);
            toDevice(pinnedIn.address(), data + at * es, bytes);
        }
    }

    /**
     * Piece by piece: the send blocks reordered in device scratch so that local rank l's part of a
     * reduce-scatter on the host's GPUs is the blocks of the ranks with local index l on every host, host
     * by host; that reduce-scatter; its result to pinned memory; a reduce-scatter on the cross-host ring,
     * whose position h receives the block of host h's rank of this local index: this rank's own.
     */
    @Override
    public void reduceScatter(long send, long recv, long recvCount, DataType type, ReduceOp op) {
        CollectiveHeader call = start(Kind.REDUCE_SCATTER, type, op, 0, recvCount);
        int es = type.size();
        int hosts = layout.hosts();
        int perHost = hostRanks.length;
        int[][] byHost = layout.byHost();
        ReduceOp levelOp = TwoLevelSchedule.levelOp(op);
        long piece = PIECE_BYTES / ((long) size * es);
        try {
            checkInside(call);
            for (long at = 0; at < recvCount; at += piece) {
                long n = Math.min(piece, recvCount - at);
                long bytes = n * es;
                long ordered = scratch.address();
                long mine = ordered + size * bytes;
                for (int l = 0; l < perHost; l++) {
                    for (int h = 0; h < hosts; h++) {
                        copyOnDevice(send + (byHost[h][l] * recvCount + at) * es, ordered + ((long) l * hosts + h) * bytes,
                                bytes);
                    }
                }
                stream().synchronize();
                long hostBlocks = n * hosts;
                inHost(() -> inside.reduceScatter(ordered, mine, hostBlocks, type, levelOp));
                toHost(mine, pinnedIn.address(), hosts * bytes);
                across.partOf(call);
                across.reduceScatter(pinnedIn.address(), pinnedOut.address(), n, type, levelOp);
                if (op == ReduceOp.AVG) {
                    Reduction.divide(type, pinnedOut.address(), n, size);
                }
                toDevice(pinnedOut.address(), recv + at * es, bytes);
            }
        } catch (RuntimeException e) {
            throw failed(e, call);
        }
    }

    /**
     * Piece by piece: an all-gather on the host's GPUs into device scratch, to pinned memory, an
     * all-gather of the hosts' blocks on the cross-host ring, and each rank's block back to its place.
     */
    @Override
    public void allGather(long send, long recv, long sendCount, DataType type) {
        CollectiveHeader call = start(Kind.ALL_GATHER, type, ReduceOp.SUM, 0, sendCount);
        int es = type.size();
        int hosts = layout.hosts();
        int perHost = hostRanks.length;
        int[][] byHost = layout.byHost();
        long piece = PIECE_BYTES / ((long) size * es);
        try {
            checkInside(call);
            for (long at = 0; at < sendCount; at += piece) {
                long n = Math.min(piece, sendCount - at);
                long bytes = n * es;
                long from = send + at * es;
                inHost(() -> inside.allGather(from, scratch.address(), n, type));
                toHost(scratch.address(), pinnedIn.address(), perHost * bytes);
                across.partOf(call);
                across.allGather(pinnedIn.address(), pinnedOut.address(), n * perHost, type);
                for (int h = 0; h < hosts; h++) {
                    for (int l = 0; l < perHost; l++) {
                        copyToDeviceAsync(pinnedOut.address() + ((long) h * perHost + l) * bytes,
                                recv + (byHost[h][l] * sendCount + at) * es, bytes);
                    }
                }
                stream().synchronize();
            }
        } catch (RuntimeException e) {
            throw failed(e, call);
        }
    }

    /**
     * A broadcast on the root's host's GPUs; then each cross-host ring carries its local index's shard
     * from the root's host (the last count mod L elements on every ring), and the other hosts all-gather
     * the shards on their GPUs.
     */
    @Override
    public void broadcast(long send, long recv, long count, DataType type, int root) {
        if (root < 0 || root >= size) {
            throw new IllegalArgumentException("rank " + rank + ": broadcast root " + root + " is not a rank of 0.."
                    + (size - 1));
        }
        CollectiveHeader call = start(Kind.BROADCAST, type, ReduceOp.SUM, root, count);
        int es = type.size();
        int perHost = hostRanks.length;
        int[] rootPlace = layout.place(root);
        boolean rootHost = rootPlace[0] == host;
        long shard = count / perHost;
        long tail = count - shard * perHost;
        try {
            checkInside(call);
            if (rootHost) {
                inHost(() -> inside.broadcast(send, recv, count, type, rootPlace[1]));
            }
            if (shard > 0) {
                long mine = recv + local * shard * es;
                broadcastInPieces(call, mine, shard, type, rootPlace[0], rootHost);
                if (!rootHost) {
                    inHost(() -> inside.allGather(mine, recv, shard, type));
                }
            }
            if (tail > 0) {
                broadcastInPieces(call, recv + shard * perHost * es, tail, type, rootPlace[0], rootHost);
            }
        } catch (RuntimeException e) {
            throw failed(e, call);
        }
    }

    private void broadcastInPieces(CollectiveHeader call, long data, long count, DataType type, int rootHost,
                                   boolean sending) {
        int es = type.size();
        long piece = PIECE_BYTES / es;
        for (long at = 0; at < count; at += piece) {
            long bytes = Math.min(piece, count - at) * es;
            if (sending) {
                toHost(data + at * es, pinnedIn.address(), bytes);
            }
            across.partOf(call);
            across.broadcast(pinnedIn.address(), pinnedIn.address(), bytes / es, type, rootHost);
            if (!sending) {
                toDevice(pinnedIn.address(), data + at * es, bytes);
            }
        }
    }

    /** Every rank of this host (the header check is a collective there), then everyone of this local index. */
    @Override
    public void barrier() {
        CollectiveHeader call = start(Kind.BARRIER, DataType.INT32, ReduceOp.SUM, 0, 1);
        try {
            checkInside(call);
            across.partOf(call);
            across.barrier();
        } catch (RuntimeException e) {
            throw failed(e, call);
        }
    }

    /** Device memory for the array overloads, from the GPU communicator's pool. */
    @Override
    public StagingBuffer allocateStaging(long bytes) {
        ensureUsable();
        return inside.allocateStaging(bytes);
    }

    // ---- Inside a call. ---------------------------------------------------------------------------

    private CollectiveHeader start(Kind kind, DataType type, ReduceOp op, int root, long count) {
        ensureUsable();
        if (count < 0) {
            throw new IllegalArgumentException("rank " + rank + ": negative element count " + count);
        }
        device.makeCurrent();
        return new CollectiveHeader(++sequence, kind, type, op, Protocol.SIMPLE, root, count);
    }

    /** The host's ranks compare their calls over the TCP ring among them (the GPU level could agree where they do not). */
    private void checkInside(CollectiveHeader call) {
        HostCallCheck.check(hostRing, call, rank, hostRanks);
    }

    private void toHost(long deviceAddress, long hostAddress, long bytes) {
        Cuda.check(JCudaDriver.cuMemcpyDtoHAsync(Cuda.hostMemory(hostAddress, bytes), Cuda.devicePointer(deviceAddress),
                bytes, stream().handle()), "cuMemcpyDtoHAsync(" + bytes + " bytes, to pinned memory)", where());
        stream().synchronize();
    }

    private void toDevice(long hostAddress, long deviceAddress, long bytes) {
        copyToDeviceAsync(hostAddress, deviceAddress, bytes);
        stream().synchronize();
    }

    private void copyToDeviceAsync(long hostAddress, long deviceAddress, long bytes) {
        Cuda.check(JCudaDriver.cuMemcpyHtoDAsync(Cuda.devicePointer(deviceAddress), Cuda.hostMemory(hostAddress, bytes),
                bytes, stream().handle()), "cuMemcpyHtoDAsync(" + bytes + " bytes, from pinned memory)", where());
    }

    private void copyOnDevice(long from, long to, long bytes) {
        Cuda.check(JCudaDriver.cuMemcpyDtoDAsync(Cuda.devicePointer(to), Cuda.devicePointer(from), bytes,
                stream().handle()), "cuMemcpyDtoDAsync(" + bytes + " bytes)", where());
    }

    private String where() {
        return device.where() + ", rank " + rank + " (two-level)";
    }

    /**
     * A call of the GPU level, its failure renumbered: that communicator numbers this host's ranks by
     * local index.
     */
    private void inHost(Runnable call) {
        try {
            call.run();
        } catch (PeerFailedException e) {
            int failed = e.failedRank();
            int global = failed >= 0 && failed < hostRanks.length ? hostRanks[failed] : failed;
            throw new PeerFailedException(global, "rank " + rank + ", on host " + host + " where local rank " + failed
                    + " is rank " + global + " (local ranks numbered as " + Arrays.toString(hostRanks) + "): "
                    + e.getMessage(), e);
        }
    }

    /**
     * One level failed: the others learn it (peers waiting on this rank there stop too), and the error
     * names the two-level call it broke.
     */
    private RuntimeException failed(RuntimeException e, CollectiveHeader call) {
        abort(e);
        String message = "rank " + rank + ": two-level GPU " + call.describe() + " failed: " + e.getMessage();
        return e instanceof PeerFailedException ? new PeerFailedException(((PeerFailedException) e).failedRank(), message, e)
                : e.getClass() == CclException.class ? new CclException(message, e) : e;
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
        if (!closed) {
            abort(new CclException("rank " + rank + ": " + reason));
        }
    }

    private void abort(RuntimeException e) {
        if (brokenBy != null) {
            return;
        }
        brokenBy = String.valueOf(e.getMessage());
        if (across != null) {
            across.abort(e);
        }
        if (hostRing != null) {
            hostRing.abort(e);
        }
        if (inside != null) {
            inside.abortPeers(brokenBy);
        }
    }

    /** Closes both levels and frees the staging memory; the first failure is thrown, the rest suppressed. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        RuntimeException first = null;
        for (AutoCloseable part : new AutoCloseable[] {across, inside, hostRing, scratch, pinnedOut, pinnedIn}) {
            if (part == null) {
                continue;
            }
            try {
                part.close();
            } catch (Exception e) {
                RuntimeException r = e instanceof RuntimeException ? (RuntimeException) e
                        : new CclException("rank " + rank + ": closing " + part + " failed", e);
                if (first == null) {
                    first = r;
                } else {
                    first.addSuppressed(r);
                }
            }
        }
        if (first != null) {
            throw first;
        }
    }

    @Override
    public String toString() {
        return "GpuTwoLevelCommunicator(rank " + rank + " of " + size + ", " + links + ")";
    }
}
