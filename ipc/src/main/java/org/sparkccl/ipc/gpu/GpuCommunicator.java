package org.sparkccl.ipc.gpu;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.sparkccl.core.Bootstrap;
import org.sparkccl.core.CclException;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.DataType;
import org.sparkccl.core.MemoryKind;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.StagingBuffer;
import org.sparkccl.core.jdk.JdkAccess;
import org.sparkccl.core.log.Subsys;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.proto.CollectiveHeader.Kind;
import org.sparkccl.core.topo.Ring;
import org.sparkccl.ipc.cuda.CudaDevice;
import org.sparkccl.ipc.cuda.CudaStream;
import org.sparkccl.ipc.cuda.DeviceBuffer;

/**
 * Collectives between GPUs of one machine. Each rank runs one persistent kernel per collective
 * (ring_kernels.cu) that does the whole ring, one block per channel, writing into its successor's
 * receive window: device memory mapped through CUDA IPC (or a plain pointer for ranks of this
 * process) where the two GPUs reach each other peer-to-peer, else a /dev/shm window both GPUs map
 * (host-staged). Built with one bootstrap round. Addresses are device pointers of this rank's GPU.
 * The {@link Communicator} calls return when the collective is complete on this rank; the calls that
 * take a {@link CudaStream} are stream-ordered, as NCCL's: they queue the collective on that stream and
 * return at once (see {@link #allReduce(long, long, long, DataType, ReduceOp, CudaStream)}).
 *
 * <p>Not thread safe: one thread per rank, as with NCCL. Ranks of one process must not free device
 * memory ({@code cuMemFree} may wait for the whole GPU) while another rank on the same GPU is inside a
 * collective.
 *
 * <p>Inside, three collaborators, one per responsibility: {@link GpuConnection} (connect: windows, rings,
 * DevComm, tuner; it owns every native resource), {@link GpuLauncher} (arguments, launches, the wait
 * for a blocking call's kernel, stream-ordered calls) and {@link GpuFailures} (closed or broken, dead
 * peers, abort records, the errors). This class checks the arguments it alone knows about, and closes.
 */
public final class GpuCommunicator implements Communicator {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    /** The entries of a rank's description in the bootstrap round (RankInfo), for GpuConnection. */
    static final String ENTRY_DEVICE = "gpu.device";
    static final String ENTRY_P2P = "gpu.p2p";
    static final String ENTRY_HOST = "gpu.host";
    static final String ENTRY_HOST_SHM = "gpu.host.shm";
    static final String ENTRY_ABORT_RECORD = "gpu.abort";
    /** How long a failed connect waits for a dying peer to be gone, to remove what it left in /dev/shm. */
    private static final long CONNECT_FAILURE_GRACE_NS = TimeUnit.SECONDS.toNanos(2);

    private final int rank;
    private final int size;
    private final CudaDevice device;
    private final GpuConnection connection;
    private final GpuFailures failures;
    /** Made once connect has succeeded (it launches on what connect made); null while connecting. */
    private GpuLauncher launcher;
    private final List<DeviceBuffer> stagingPool = new ArrayList<>();

    private GpuCommunicator(int rank, int size, CudaDevice device, Params params) {
        this.rank = rank;
        this.size = size;
        this.device = device;
        this.connection = new GpuConnection(rank, size, device, params);
        this.failures = new GpuFailures(connection);
    }

    /** Builds the communicator: one {@code allGather} on the bootstrap, every rank together. */
    static GpuCommunicator create(Bootstrap bootstrap, int deviceOrdinal, Params params, BooleanSupplier cancelled) {
        CudaDevice device = CudaDevice.get(deviceOrdinal);
        GpuCommunicator comm = new GpuCommunicator(bootstrap.rank(), bootstrap.size(), device, params);
        GpuConnection connection = comm.connection;
        try {
            connection.connect(bootstrap);
            comm.launcher = new GpuLauncher(connection, comm.failures, cancelled);
            return comm;
        } catch (RuntimeException e) {
            // A peer that died while connecting may have left a window in /dev/shm. Its sockets close
            // before its process is gone (a CUDA process takes a while to exit), so give it a moment.
            comm.failures.cleanUpAfterDeadPeers(CONNECT_FAILURE_GRACE_NS);
            comm.close();
            throw e;
        } finally {
            if (connection.gateId != null) {
                InProcessConnectGate.connected(connection.gateId, connection.ranksInProcess);
            }
        }
    }

    // ---- Collectives. ------------------------------------------------------------------------------

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
        return size == 1 ? "one GPU rank" : "one host: " + size + " GPU ranks, GPU engine";
    }

    /** The GPU this rank runs on. */
    public CudaDevice device() {
        return device;
    }

    /**
     * True where some process holds several ranks of this communicator on one GPU, false where each
     * process's ranks have GPUs of their own; the same on every rank. Stream-ordered calls are not for
     * such layouts: two ranks' streams of one context can land in one hardware queue (there are
     * CUDA_DEVICE_MAX_CONNECTIONS of them), and then a rank's copy or kernel queued behind its peer's
     * collective, which waits for that rank, never runs: on one H200, 2 ranks as threads, a stream-ordered
     * reduce-scatter / all-gather / broadcast sequence hung in 1 of 3 runs of GpuStreamOrderedTest.
     * Callers that choose between blocking and stream-ordered calls (GpuModelTrainer) ask this.
     */
    public boolean someProcessSharesAGpu() {
        return connection.someProcessSharesAGpu;
    }

    /** The stream collectives run on (non-blocking); copies that must order with them can use it. */
    public CudaStream stream() {
        return connection.stream;
    }

    /** The ring channel {@code channel} runs (logs, tests); null for a single rank or a channel past the last. */
    Ring ring(int channel) {
        List<Ring> rings = connection.rings;
        return channel < rings.size() ? rings.get(channel) : null;
    }

    /** How this rank is connected, for logs and benchmarks. */
    public String describeLinks() {
        return connection.links;
    }

    @Override
    public void allReduce(long sendAddress, long recvAddress, long count, DataType type, ReduceOp op) {
        launcher.run(Kind.ALL_REDUCE, sendAddress, recvAddress, count, type, op, 0);
    }

    @Override
    public void reduceScatter(long sendAddress, long recvAddress, long recvCount, DataType type, ReduceOp op) {
        launcher.run(Kind.REDUCE_SCATTER, sendAddress, recvAddress, recvCount, type, op, 0);
    }

    @Override
    public void allGather(long sendAddress, long recvAddress, long sendCount, DataType type) {
        launcher.run(Kind.ALL_GATHER, sendAddress, recvAddress, sendCount, type, ReduceOp.SUM, 0);
    }

    @Override
    public void broadcast(long sendAddress, long recvAddress, long count, DataType type, int root) {
        checkRoot(root);
        launcher.run(Kind.BROADCAST, sendAddress, recvAddress, count, type, ReduceOp.SUM, root);
    }

    private void checkRoot(int root) {
        if (root < 0 || root >= size) {
            throw new IllegalArgumentException("root " + root + " is not a rank of this communicator of " + size);
        }
    }

    @Override
    public void barrier() {
        launcher.run(Kind.BARRIER, connection.barrierBuffer.address(), connection.barrierBuffer.address(), 1,
                DataType.INT32, ReduceOp.SUM, 0);
    }

    // ---- Stream-ordered calls (NCCL's kind). ----------------------------------------------------------

    /**
     * Queues an all-reduce on {@code on} and returns at once: it runs after the work queued there
     * before it, and work queued after it sees its result; calls queued back to back pipeline (no host
     * wait between them). It can be captured into a CUDA graph ({@code CudaGraph.capture}) and
     * replayed: the kernels number their calls themselves. Calls of this communicator on different
     * streams run in the order they were made (a call on a new stream waits for the previous stream's).
     *
     * <p>Failures (a mismatch with the other ranks, a dead peer, a timeout, a cancelled task) surface
     * as an exception naming this rank and the call at the next call on this communicator, at
     * {@link #synchronize} or at {@link #checkErrors}; meanwhile the kernels stop at their next poll
     * instead of hanging (a {@link GpuPeerWatcher} raises the abort word when a peer process dies or the
     * task is cancelled). A blocking call first waits for the stream-ordered calls before it. Ranks of
     * one process that share a GPU must make each call in the same mode (both stream-ordered or both
     * blocking); what stream-ordered calls then rely on is in docs/architecture.md.
     */
    public void allReduce(long sendAddress, long recvAddress, long count, DataType type, ReduceOp op, CudaStream on) {
        launcher.enqueue(Kind.ALL_REDUCE, sendAddress, recvAddress, count, type, op, 0, on);
    }

    /** {@link #reduceScatter(long, long, long, DataType, ReduceOp)}, stream-ordered as {@link #allReduce(long, long, long, DataType, ReduceOp, CudaStream)}. */
    public void reduceScatter(long sendAddress, long recvAddress, long recvCount, DataType type, ReduceOp op,
                              CudaStream on) {
        launcher.enqueue(Kind.REDUCE_SCATTER, sendAddress, recvAddress, recvCount, type, op, 0, on);
    }

    /** {@link #allGather(long, long, long, DataType)}, stream-ordered as {@link #allReduce(long, long, long, DataType, ReduceOp, CudaStream)}. */
    public void allGather(long sendAddress, long recvAddress, long sendCount, DataType type, CudaStream on) {
        launcher.enqueue(Kind.ALL_GATHER, sendAddress, recvAddress, sendCount, type, ReduceOp.SUM, 0, on);
    }

    /** {@link #broadcast(long, long, long, DataType, int)}, stream-ordered as {@link #allReduce(long, long, long, DataType, ReduceOp, CudaStream)}. */
    public void broadcast(long sendAddress, long recvAddress, long count, DataType type, int root, CudaStream on) {
        checkRoot(root);
        launcher.enqueue(Kind.BROADCAST, sendAddress, recvAddress, count, type, ReduceOp.SUM, root, on);
    }

    /** Waits until the work queued on {@code on} is done, then throws if a stream-ordered call failed. */
    public void synchronize(CudaStream on) {
        launcher.synchronize(on);
    }

    /**
     * Throws if a stream-ordered call has failed so far (as far as the GPU got), naming the call; does not
     * wait. Also throws when the communicator is closed or broken.
     */
    public void checkErrors() {
        launcher.checkErrors();
    }

    // ---- Failures. --------------------------------------------------------------------------------

    /**
     * Tells the peers that this rank failed outside its collectives (its Spark task failed or was
     * killed between them): its abort record says {@code reason}, so that a peer waiting in a
     * collective for this rank, or entering one, fails within its next check (50 ms) naming this rank
     * and the reason; this rank's stream-ordered calls still queued stop. Does nothing once closed or
     * broken (a failed collective already recorded why).
     */
    @Override
    public void abort(String reason) {
        failures.abortBetweenCollectives(reason);
    }

    /**
     * Fails this communicator for a reason outside its kernels (the other level of a two-level
     * communicator failed), so that peers waiting for this rank in a kernel, or launching one later, stop
     * at once instead of at the timeout: a barrier kernel launched with the host abort raised stops at its
     * first wait and raises the abort words of its ring neighbours (an abort travels round channel 0's
     * ring). It bypasses the launch gate: a peer of this process may be inside a kernel that waits for this
     * rank and never come to the gate. Does nothing once closed or broken (peers know then).
     */
    void abortPeers(String reason) {
        if (failures.closedOrBroken()) {
            return;
        }
        // The record first, as every failure of this rank's own: peers stopped by the kernel name the reason.
        failures.record(new CclException(reason));
        failures.markBroken(reason);
        if (size == 1) {
            return;
        }
        try {
            launcher.launchAbortBarrier();
        } catch (RuntimeException e) {
            // The peers then learn it from their own waits (a dead peer, the timeout): nothing more to do here.
            connection.log.warn(Subsys.INIT, "rank %d: the abort kernel failed (%s); peers learn of this rank's failure later",
                    rank, e.getMessage());
        }
    }

    // ---- Staging for Java arrays. ------------------------------------------------------------------

    /**
     * Device memory for the array overloads. Buffers are kept and reused until the communicator
     * closes: freeing device memory between collectives could wait on another rank's kernel.
     */
    @Override
    public StagingBuffer allocateStaging(long bytes) {
        failures.checkUsable();
        DeviceBuffer buffer = null;
        synchronized (stagingPool) {
            for (int i = 0; i < stagingPool.size(); i++) {
                if (stagingPool.get(i).size() >= bytes) {
                    buffer = stagingPool.remove(i);
                    break;
                }
            }
        }
        if (buffer == null) {
            buffer = DeviceBuffer.allocate(device, Math.max(bytes, 4096), "rank " + rank + " staging");
        }
        return new GpuStagingBuffer(buffer, bytes, connection.stream, this::returnStaging);
    }

    private void returnStaging(DeviceBuffer buffer) {
        synchronized (stagingPool) {
            if (failures.closed()) {
                buffer.close();
            } else {
                stagingPool.add(buffer);
            }
        }
    }

    // ---- Close. -----------------------------------------------------------------------------------

    /**
     * Frees everything. No peer writes into this rank's window after this rank's last collective has
     * returned (heads live with their receiver), so closing needs no handshake.
     */
    @Override
    public void close() {
        if (failures.closed()) {
            return;
        }
        device.makeCurrent();
        RuntimeException first = null;
        StreamCalls streamCalls = connection.streamCalls;
        if (streamCalls != null && streamCalls.pending()) {
            try {
                streamCalls.drain("rank " + rank + ": close"); // nothing is freed under a kernel still queued
            } catch (RuntimeException e) {
                first = e;
            }
        }
        failures.markClosed();
        synchronized (stagingPool) {
            for (DeviceBuffer b : stagingPool) {
                try {
                    b.close();
                } catch (RuntimeException e) {
                    first = first == null ? e : first;
                }
            }
            stagingPool.clear();
        }
        first = connection.closeAll(first);
        if (first != null) {
            throw first;
        }
    }

    /** How often the resident one-shot kernel was launched (0 without one), for tests. */
    int residentLaunches() {
        return launcher.residentLaunches();
    }

    /** Each one-shot block's copy of this rank's one-shot call count, for tests (GpuConnection.oneShotCallCounts). */
    int[] oneShotCallCounts() {
        return connection.oneShotCallCounts();
    }

    /** How often the stream-resident one-shot kernel was launched (0 without one), for tests. */
    int streamResidentLaunches() {
        return launcher.streamResidentLaunches();
    }

    /** How many stream-ordered calls were queued through the one-kernel graph (SPARKCCL_STREAM_LAUNCH=graph), for tests. */
    long graphLaunches() {
        return launcher.graphLaunches();
    }

    /** Host time of the last kernel launch call (JCuda and the driver), for benchmarks. */
    public long lastLaunchNanos() {
        return launcher.lastLaunchNanos();
    }

    /**
     * With SPARKCCL_PROBE=1: where the time of the last {@code calls} one-shot all-reduces went, as the GPU's
     * timestamps show (GpuProbes.summary); null when probes are off. Waits for this rank's queued work.
     */
    public String probeSummary(int calls) {
        GpuProbes probes = connection.probes;
        if (probes == null) {
            return null;
        }
        connection.stream.synchronize();
        long[] words = probes.read(connection.stream);
        long last = 0;
        for (int s = 0; s < GpuProbes.SLOTS; s++) {
            last = Math.max(last, words[s * GpuProbes.WORDS + GpuProbes.SEQ]);
        }
        return GpuProbes.summary(words, last, calls);
    }

    /** GPU time of the last collective kernel, from its first block's start to its last block's end. */
    public long lastKernelNanos() {
        return launcher.lastKernelNanos();
    }

    /**
     * Host time of the last blocking call from its entry to its launch or doorbell (argument checks, the
     * shared-GPU launch gate, the arguments), for benchmarks.
     */
    public long lastHostNanos() {
        return launcher.lastHostNanos();
    }

    /** Host time of the last blocking call after its launch or doorbell until it saw the kernel's done word. */
    public long lastWaitNanos() {
        return launcher.lastWaitNanos();
    }

    /** How an all-reduce of {@code count} elements runs: LL, Simple or 1shot (benchmark columns). */
    public String algorithmFor(long count, DataType type) {
        return size == 1 ? "copy" : connection.tuner.plan(Kind.ALL_REDUCE, count, type, size).algorithm();
    }
}
