package org.sparkccl.ipc.gpu;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import jcuda.Pointer;
import jcuda.driver.CUfunction;
import jcuda.driver.JCudaDriver;
import org.sparkccl.core.CclException;
import org.sparkccl.core.DataType;
import org.sparkccl.core.PeerFailedException;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.jdk.JdkAccess;
import org.sparkccl.core.log.CclLog;
import org.sparkccl.core.log.Subsys;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.proto.CollectiveHeader;
import org.sparkccl.core.proto.CollectiveHeader.Kind;
import org.sparkccl.core.wait.SpinYieldPark;
import org.sparkccl.ipc.cuda.Cuda;
import org.sparkccl.ipc.cuda.CudaDevice;
import org.sparkccl.ipc.cuda.CudaException;
import org.sparkccl.ipc.cuda.CudaStream;
import org.sparkccl.ipc.cuda.GraphLaunch;
import org.sparkccl.ipc.cuda.ProgrammaticLaunch;

/**
 * How a {@link GpuCommunicator}'s collectives reach the GPU and how their end is seen: the kernel
 * arguments ({@code CollArgs}, one direct buffer reused by every call), the launch (a ring or one-shot
 * kernel per call, or a doorbell of the {@link ResidentKernel}), the host's wait for a blocking call's
 * kernel (polling the mapped status block, watching peers, the cancel flag and the backup timeout), and
 * the stream-ordered calls: queued on the caller's stream, ordered across streams ({@link StreamCalls}),
 * watched by a {@link GpuPeerWatcher} and checked at the next call, {@code synchronize} or
 * {@code checkErrors}.
 *
 * <p>Every call numbers itself with the next ticket ({@code sequence}), puts its arguments and
 * launches; a blocking one then waits ({@link #run}), a stream-ordered one returns ({@link #enqueue}).
 * New ways to launch (persistent kernels, graphs) belong here, beside {@link #launch}. Failures are
 * turned into errors by {@link GpuFailures}; what the kernels are connected with is in
 * {@link GpuConnection}.
 */
final class GpuLauncher {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    private static final long PEER_CHECK_INTERVAL_NS = TimeUnit.MILLISECONDS.toNanos(50);
    /** Parks, once a wait has yielded for SpinYieldPark's 20 ms, last this long (a GPU call ends on its own). */
    private static final long PARK_NS = TimeUnit.MICROSECONDS.toNanos(20);

    private final GpuConnection c;
    private final GpuFailures failures;
    private final BooleanSupplier cancelled;
    private final int rank;
    private final int size;
    private final CudaDevice device;
    private final CclLog log;
    private final String where;
    // The kernel's parameter block in native memory: JCuda passes a direct buffer by its address,
    // where a Java array would be pinned or copied on every launch.
    private final ByteBuffer argsView = ByteBuffer.allocateDirect(DevCommLayout.ARGS_BYTES).order(ByteOrder.LITTLE_ENDIAN);
    private final Pointer kernelParams = Pointer.to(Pointer.to(argsView));
    /**
     * One-shot kernels of at most this many blocks go through {@link #programmatic} (0: none): the blocks a
     * kernel launched early holds while it waits must leave room for the peers' kernels that it waits for,
     * where ranks share a GPU (each one-shot block waits only for peers, never for its own kernel's blocks).
     */
    private final int programmaticMaxBlocks;
    /** Launches with programmatic dependent launch (sm_90 and up), else null. */
    private final ProgrammaticLaunch programmatic;
    /** Queues stream-ordered calls outside a graph capture (Params.STREAM_LAUNCH graph), else null. */
    private final GraphLaunch graphLaunch;
    /** How waitForKernel idles (the host engine's strategy, with fixed 20 us parks). */
    private final SpinYieldPark idle;
    /** Started by the first stream-ordered call. */
    private GpuPeerWatcher watcher;
    /** The last call's ticket: every launch takes the next one. */
    private int sequence;
    private long lastLaunchNanos;
    private long lastKernelNanos;
    private long lastHostNanos;
    private long lastWaitNanos;

    /** Launches on what {@code connection} connected (connect has succeeded). */
    GpuLauncher(GpuConnection connection, GpuFailures failures, BooleanSupplier cancelled) {
        this.c = connection;
        this.failures = failures;
        this.cancelled = cancelled;
        this.rank = connection.rank;
        this.size = connection.size;
        this.device = connection.device;
        this.log = connection.log;
        this.where = connection.where;
        Params params = connection.params;
        this.idle = new SpinYieldPark(params.get(Params.SPINS_BEFORE_YIELD), SpinYieldPark.DEFAULT_YIELD_NANOS, PARK_NS,
                PARK_NS);
        if (connection.devComm != null) { // none for a single rank: its calls are copies
            argsView.putLong(DevCommLayout.ARG_COMM, connection.devComm.address());
        }
        int maxBlocks = params.get(Params.PDL_MAX_BLOCKS);
        if (maxBlocks > 0 && device.computeCapability() >= 90 && ProgrammaticLaunch.unavailable() == null) {
            this.programmatic = new ProgrammaticLaunch(argsView, where);
            this.programmaticMaxBlocks = maxBlocks;
        } else {
            this.programmatic = null;
            this.programmaticMaxBlocks = 0;
        }
        // Made here, before the communicator's first collective (GraphLaunch says why).
        boolean graph = connection.devComm != null && "graph".equalsIgnoreCase(params.get(Params.STREAM_LAUNCH));
        if (graph && GraphLaunch.unavailable() != null) {
            log.warn(Subsys.INIT, "rank %d: SPARKCCL_STREAM_LAUNCH=graph, but %s; stream-ordered calls launch their kernels",
                    rank, GraphLaunch.unavailable());
            graph = false;
        }
        this.graphLaunch = graph ? c.own(new GraphLaunch(device, c.module.function(GpuPlan.oneShotKernelName(DataType.FLOAT32)),
                argsView, where)) : null;
    }

    // ---- Blocking calls: launch, then wait on the host. ---------------------------------------------

    /**
     * A blocking collective: waits for the stream-ordered calls before it, meets the ranks of this
     * process on this GPU at the launch gate, launches (or rings the resident kernel) and returns once
     * the kernel reported completion, or throws naming this rank and the call.
     */
    void run(Kind kind, long send, long recv, long count, DataType type, ReduceOp op, int root) {
        long entered = System.nanoTime();
        if (!accept(send, recv, count, type)) {
            return;
        }
        if (c.streamCalls.pending()) {
            drainStreamCalls("rank " + rank + ": a blocking " + kind);
        }
        if (size == 1) {
            copySingleRank(send, recv, count, type, c.stream);
            c.stream.synchronize();
            return;
        }
        if (c.gateId != null) {
            awaitInProcessPeers();
        }
        GpuPlan plan = c.tuner.plan(kind, count, type, size);
        int seq = ++sequence;
        CollectiveHeader header = new CollectiveHeader(seq, kind, type, op, plan.protocol, root, count);
        CclException gateFailure = null;
        if (c.launchGate != null) {
            try {
                c.launchGate.awaitPeers(cancelled, c.timeoutNs, () -> "rank " + rank + " on " + device.where() + ": "
                        + header.describe());
            } catch (CclException e) {
                // Launch anyway, with the abort raised: the kernel stops at its first wait and raises every
                // peer's abort word, so ranks in other processes stop too instead of waiting for the timeout.
                gateFailure = e;
                failures.record(e); // before the abort word: the peers read why
                failures.raiseHostAbort();
            }
        }
        putArgs(header, plan, send, recv, 0);
        boolean viaResident = c.resident != null && plan.oneShot && c.resident.takes(count * type.size());
        if (viaResident) {
            // The resident kernel runs on a stream of its own: what the caller queued on the communicator's
            // stream before this call (the input's copy, say) must be done before the doorbell rings, as it
            // would be before a kernel launched there. The driver is asked only when something may have been
            // queued there since it was last seen idle (CudaStream.awaitQueuedWork): a cuStreamQuery on every
            // call cost 5-8 us of host time per call (2 ranks as threads on one H200, same run).
            try {
                c.stream.awaitQueuedWork();
            } catch (CudaException e) {
                throw failures.failedCuda(header.describe(), e);
            }
        }
        long launchStart = System.nanoTime();
        lastHostNanos = launchStart - entered;
        if (viaResident) {
            c.resident.ring(argsView, seq);
        } else {
            launch(plan, c.stream);
        }
        lastLaunchNanos = System.nanoTime() - launchStart;
        try {
            waitForKernel(header, viaResident);
        } catch (CudaException e) {
            if (gateFailure == null) {
                throw failures.failedCuda(header.describe(), e);
            }
        } catch (CclException e) {
            if (gateFailure == null) {
                throw e;
            }
        }
        if (gateFailure != null) {
            failures.markBroken(gateFailure.getMessage());
            throw gateFailure;
        }
        lastKernelNanos = c.statusView.getLongVolatile(DevCommLayout.STATUS_END_NS)
                - c.statusView.getLongVolatile(DevCommLayout.STATUS_START_NS);
        lastWaitNanos = System.nanoTime() - launchStart - lastLaunchNanos;
    }

    /**
     * Waits until the kernel says it is done: its last block writes the call's sequence number into
     * mapped host memory, which costs a memory read to poll (the driver's stream query is a JNI call of
     * about a microsecond). The stream is asked too, now and then, so that a kernel that crashed is
     * noticed. Meanwhile every peer process is checked to be alive; if one died, the kernel is asked to
     * stop (host abort word) and the call fails naming it. The kernel has its own timeout; this one only
     * backs it up.
     */
    private void waitForKernel(CollectiveHeader header, boolean viaResident) {
        CudaStream kernelStream = viaResident ? c.resident.stream() : c.stream;
        long start = System.nanoTime();
        long nextCheck = start + PEER_CHECK_INTERVAL_NS;
        int idles = 0;
        int deadPeer = -1;
        boolean hostTimedOut = false;
        String stoppedBy = null;
        CclException stopped = null;
        PeerFailedException peerAbort = null;
        int seq = header.sequence;
        idle.reset();
        while (c.statusView.getIntVolatile(DevCommLayout.STATUS_DONE_SEQ) != seq) {
            ++idles;
            if (viaResident && (idles & 63) == 0) {
                c.resident.relaunchIfMissed(c.statusView, seq);
            }
            if ((idles & 1023) == 0 && kernelStream.isIdle() && c.statusView.getIntVolatile(DevCommLayout.STATUS_DONE_SEQ) != seq) {
                throw failures.fail(header.describe(), DevCommLayout.CODE_KERNEL_LOST, deadPeer);
            }
            idle.idle();
            if (!idle.pastSpinning()) {
                continue;
            }
            if (stoppedBy == null) {
                // The kernel cannot be killed: it is asked to stop, raises every rank's abort word, and ends.
                if (Thread.currentThread().isInterrupted()) {
                    stoppedBy = "interrupted";
                } else if (cancelled.getAsBoolean()) {
                    stoppedBy = "cancelled (task killed)";
                }
                if (stoppedBy != null) {
                    stopped = failures.ownFailure("rank " + rank + " on " + device.where() + ": " + header.describe() + " "
                            + stoppedBy + "; the other ranks stop with an abort", "while this rank waited for "
                            + header.describe());
                    failures.raiseHostAbort();
                }
            }
            long now = System.nanoTime();
            if (now - nextCheck > 0) {
                nextCheck = now + PEER_CHECK_INTERVAL_NS;
                if (deadPeer < 0) {
                    deadPeer = failures.deadPeer();
                    if (deadPeer >= 0) {
                        failures.raiseHostAbort();
                    }
                }
                if (deadPeer < 0 && peerAbort == null && stoppedBy == null && c.abortRecords != null) {
                    // A peer that failed outside a collective (its task, between them) has no kernel to stop ours.
                    peerAbort = c.abortRecords.peerAbort("while this rank waited for " + header.describe());
                    if (peerAbort != null) {
                        failures.record(peerAbort);
                        failures.raiseHostAbort();
                    }
                }
                if (!hostTimedOut && c.timeoutNs > 0 && now - start > c.timeoutNs + TimeUnit.SECONDS.toNanos(10)) {
                    hostTimedOut = true;
                    failures.raiseHostAbort();
                }
            }
        }
        if (stopped != null) {
            failures.markBroken(stopped.getMessage());
            throw stopped;
        }
        if (peerAbort != null && deadPeer < 0) {
            failures.markBroken(peerAbort.getMessage());
            throw peerAbort;
        }
        int code = c.statusView.getIntVolatile(DevCommLayout.STATUS_CODE);
        if (code == DevCommLayout.CODE_OK && deadPeer < 0 && !hostTimedOut) {
            if (c.hostWindowToUnlink != null) {
                c.hostWindowToUnlink.unlinkName(); // the predecessor has it mapped: it just wrote into it
                c.hostWindowToUnlink = null;
            }
            return;
        }
        throw failures.fail(header.describe(), code, deadPeer);
    }

    // ---- Stream-ordered calls: queue on the caller's stream, check later. -------------------------

    /**
     * A stream-ordered collective: queued on {@code on} after the calls before it (of this communicator,
     * on any stream), and returns at once; its failure surfaces at the next call, synchronize or
     * checkErrors.
     */
    void enqueue(Kind kind, long send, long recv, long count, DataType type, ReduceOp op, int root,
            CudaStream on) {
        if (on.device() != device) {
            throw new IllegalArgumentException("rank " + rank + ": the stream belongs to " + on.device().where()
                    + ", this communicator to " + device.where());
        }
        if (!accept(send, recv, count, type)) {
            return;
        }
        if (size == 1) {
            copySingleRank(send, recv, count, type, on);
            return;
        }
        if (c.gateId != null) {
            awaitInProcessPeers();
        }
        if (watcher == null) {
            watcher = c.own(new GpuPeerWatcher("sparkccl-gpu-watch-rank" + rank, size, failures::isDead, cancelled,
                    () -> c.abortRecords != null && c.abortRecords.peerAbort("") != null,
                    () -> failures.raiseHostAbort()));
        }
        c.streamCalls.before(on);
        GpuPlan plan = c.tuner.plan(kind, count, type, size);
        CollectiveHeader header = new CollectiveHeader(++sequence, kind, type, op, plan.protocol, root, count);
        putArgs(header, plan, send, recv, DevCommLayout.ARG_FLAG_STREAM);
        // Neither the stream-resident kernel nor the launch graph takes a call that is being captured (a graph
        // replays what was captured: a launch replays, a doorbell or a rewritten node does not). The driver
        // is asked once, and only where one of them could take the call.
        boolean residentTakes = c.streamResident != null && plan.oneShot && c.resident.takes(count * type.size());
        boolean capturing = (residentTakes || graphLaunch != null) && on.isCapturing();
        if (residentTakes && !capturing) {
            try {
                c.streamResident.enqueue(argsView, on, this::failedOnGpu);
            } catch (CudaException e) {
                throw failures.failedCuda(header.describe(), e);
            }
        } else if (graphLaunch != null && !capturing) {
            graphLaunch.launch(c.module.function(plan.kernel), plan.channels, plan.threads, on);
        } else {
            launch(plan, on);
        }
        c.streamCalls.queued(header);
    }

    /** Whether a kernel has reported a failure in the status words (read without waiting). */
    private boolean failedOnGpu() {
        return c.statusView.getIntVolatile(DevCommLayout.STATUS_CODE) != DevCommLayout.CODE_OK;
    }

    /** Waits for the stream-ordered calls queued so far, then throws if one of them failed. */
    private void drainStreamCalls(String what) {
        try {
            c.streamCalls.drain(what);
        } catch (CudaException e) {
            throw failures.failedCuda("the stream-ordered calls before " + what, e);
        }
        checkErrors();
    }

    /** Waits until the work queued on {@code on} is done, then throws if a stream-ordered call failed. */
    void synchronize(CudaStream on) {
        try {
            on.synchronize();
        } catch (CudaException e) {
            throw failures.failedCuda("the stream-ordered calls on " + device.where(), e);
        }
        if (c.streamCalls != null) {
            c.streamCalls.synchronizedWith(on);
        }
        checkErrors();
    }

    /**
     * Throws if a stream-ordered call has failed so far (as far as the GPU got), naming the call; does not
     * wait. Also throws when the communicator is closed or broken.
     */
    void checkErrors() {
        failures.checkUsable();
        if (size == 1) {
            return;
        }
        int code = c.statusView.getIntVolatile(DevCommLayout.STATUS_CODE);
        int dead = watcher == null ? -1 : watcher.deadPeer();
        boolean cancelledSeen = watcher != null && watcher.cancelSeen();
        if (c.abortRecords != null) {
            c.abortRecords.removeNameOnceEveryPeerMappedIt();
        }
        // A peer that aborted (also between collectives): the next call fails at once, naming it.
        PeerFailedException aborted = dead >= 0 || c.abortRecords == null ? null : c.abortRecords.peerAbort(
                code == DevCommLayout.CODE_OK && !c.streamCalls.pending() ? "before this rank's next collective"
                        : "while this rank's stream-ordered collectives ran");
        if (code == DevCommLayout.CODE_OK && dead < 0 && !cancelledSeen && aborted == null) {
            return;
        }
        String call = failedStreamCall();
        if (aborted != null) {
            failures.record(aborted);
            failures.markBroken(aborted.getMessage());
            throw aborted;
        }
        if (cancelledSeen && dead < 0) {
            CclException e = failures.ownFailure("rank " + rank + " on " + device.where() + ": " + call
                    + " cancelled (task killed); the other ranks stop with an abort", "while " + call + " ran");
            failures.markBroken(e.getMessage());
            throw e;
        }
        throw failures.fail(call, code, dead);
    }

    /** The call whose kernel failed first, as this rank queued it (its ticket is in the status block). */
    private String failedStreamCall() {
        int ticket = c.statusView.getIntVolatile(DevCommLayout.STATUS_FAILED_TICKET);
        CollectiveHeader call = ticket == 0 ? null : c.streamCalls.call(ticket);
        if (call != null) {
            return call.describe() + ", stream-ordered";
        }
        return ticket == 0 ? "a stream-ordered collective" : "stream-ordered collective #" + ticket;
    }

    // ---- What every call does: check, number, put arguments, launch. ------------------------------

    /**
     * Checks a call's arguments, and that no call before it failed (also a stream-ordered one nobody
     * waited for); false when there is nothing to do (count 0).
     */
    private boolean accept(long send, long recv, long count, DataType type) {
        checkErrors();
        if (count < 0) {
            throw new IllegalArgumentException("negative count " + count);
        }
        if (send % type.size() != 0 || recv % type.size() != 0) {
            throw new IllegalArgumentException("device addresses must be aligned to the element size (" + type.size()
                    + " bytes for " + type.ncclName() + "): send 0x" + Long.toHexString(send) + ", recv 0x"
                    + Long.toHexString(recv));
        }
        if (count == 0) {
            return false;
        }
        device.makeCurrent();
        return true;
    }

    private void awaitInProcessPeers() {
        try {
            if (!InProcessConnectGate.awaitAll(c.gateId, TimeUnit.NANOSECONDS.toMillis(c.timeoutNs))) {
                log.warn(Subsys.INIT, "rank %d: ranks of this process are still connecting after %d ms; going on",
                        rank, TimeUnit.NANOSECONDS.toMillis(c.timeoutNs));
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new CclException("rank " + rank + ": interrupted while waiting for the ranks of this process to connect");
        }
        c.gateId = null;
    }

    /** The kernel's arguments for the call {@code header} describes (its sequence number is the ticket). */
    private void putArgs(CollectiveHeader header, GpuPlan plan, long send, long recv, int flags) {
        argsView.putLong(DevCommLayout.ARG_SEND, send);
        argsView.putLong(DevCommLayout.ARG_RECV, recv);
        argsView.putLong(DevCommLayout.ARG_COUNT, header.count);
        argsView.putLong(DevCommLayout.ARG_BLOCK, plan.blockElems);
        argsView.putLong(DevCommLayout.ARG_TOTAL, plan.totalElems);
        argsView.putLong(DevCommLayout.ARG_CHUNK, plan.chunkElems);
        argsView.putLong(DevCommLayout.ARG_SLICE, plan.sliceElems);
        argsView.putInt(DevCommLayout.ARG_TICKET, header.sequence);
        argsView.putInt(DevCommLayout.ARG_KIND, header.kind.ordinal());
        argsView.putInt(DevCommLayout.ARG_TYPE, header.type.ordinal());
        argsView.putInt(DevCommLayout.ARG_OP, header.op.ordinal());
        argsView.putInt(DevCommLayout.ARG_PROTO, plan.protocol.ordinal());
        argsView.putInt(DevCommLayout.ARG_ROOT, header.root);
        argsView.putInt(DevCommLayout.ARG_NCHANNELS, plan.channels);
        argsView.putInt(DevCommLayout.ARG_FLAGS, flags);
        if (log.traceEnabled(Subsys.COLL)) {
            log.trace(Subsys.COLL, "%s: %s", header.describe(), plan);
        }
    }

    /** Queues the plan's kernel, with the arguments in argsView, on {@code on}. */
    private void launch(GpuPlan plan, CudaStream on) {
        // JCuda's call, not the driver's through JNA: with the parameters prepared once, JCuda's queued launch
        // took 4.4 us and JNA's direct mapping 4.9 (GpuFloorsBench, same run): the driver's own call is the cost.
        CUfunction function = c.module.function(plan.kernel);
        if (plan.oneShot && plan.channels <= programmaticMaxBlocks) {
            programmatic.launch(function, plan.channels, plan.threads, on);
            return;
        }
        int rc = JCudaDriver.cuLaunchKernel(function, plan.channels, 1, 1, plan.threads, 1, 1, 0, on.handle(),
                kernelParams, null);
        if (rc != 0) {
            Cuda.check(rc, "cuLaunchKernel(" + plan.kernel + ", " + plan.channels + " blocks)", where);
        }
    }

    /** A collective of one rank: its output is its input (a barrier's buffers are the same). */
    private void copySingleRank(long send, long recv, long count, DataType type, CudaStream on) {
        if (send == recv) {
            return;
        }
        long bytes = count * type.size();
        Cuda.check(JCudaDriver.cuMemcpyDtoDAsync(Cuda.devicePointer(recv), Cuda.devicePointer(send), bytes,
                on.handle()), "cuMemcpyDtoDAsync(" + bytes + " bytes)", where);
    }

    /**
     * The barrier kernel of {@link GpuCommunicator#abortPeers}, launched with the host abort word raised:
     * it stops at its first wait and raises the abort words of its ring neighbours. It bypasses the launch
     * gate, and waits for the kernel only on the stream (its status is not looked at).
     */
    void launchAbortBarrier() {
        device.makeCurrent();
        failures.raiseHostAbort();
        GpuPlan plan = c.tuner.plan(Kind.BARRIER, 1, DataType.INT32, size);
        putArgs(new CollectiveHeader(++sequence, Kind.BARRIER, DataType.INT32, ReduceOp.SUM, plan.protocol, 0, 1),
                plan, c.barrierBuffer.address(), c.barrierBuffer.address(), 0);
        launch(plan, c.stream);
        c.stream.synchronize();
    }

    // ---- For benchmarks and tests. -----------------------------------------------------------------

    /** How often the resident one-shot kernel was launched (0 without one). */
    int residentLaunches() {
        return c.resident == null ? 0 : c.resident.launches();
    }

    /** How often the stream-resident one-shot kernel was launched (0 without one). */
    int streamResidentLaunches() {
        return c.streamResident == null ? 0 : c.streamResident.launches();
    }

    /** How many stream-ordered calls were queued through the one-kernel graph (0 without one). */
    long graphLaunches() {
        return graphLaunch == null ? 0 : graphLaunch.launches();
    }

    /** Host time of the last kernel launch call (JCuda and the driver). */
    long lastLaunchNanos() {
        return lastLaunchNanos;
    }

    /** GPU time of the last collective kernel, from its first block's start to its last block's end. */
    long lastKernelNanos() {
        return lastKernelNanos;
    }

    /** Host time of the last blocking call from its entry to the launch (or doorbell): checks, gate, arguments. */
    long lastHostNanos() {
        return lastHostNanos;
    }

    /** Host time of the last blocking call from the end of the launch (or doorbell) to the kernel's done word seen. */
    long lastWaitNanos() {
        return lastWaitNanos;
    }
}
