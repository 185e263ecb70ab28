package org.sparkccl.ipc.gpu;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.sparkccl.core.CclException;
import org.sparkccl.core.CclTimeoutException;
import org.sparkccl.core.PeerFailedException;
import org.sparkccl.core.jdk.JdkAccess;
import org.sparkccl.core.proto.CollectiveHeader;
import org.sparkccl.core.transport.HostIdentity;
import org.sparkccl.core.transport.RankInfo;
import org.sparkccl.ipc.cuda.CudaException;

/**
 * How a {@link GpuCommunicator} fails, and what it is after: whether it is closed or broken (and by
 * what), which peer processes are dead, the error a failed call raises (from the kernel's status code, a
 * dead peer or a failed CUDA call, with the messages the tests match), this rank's abort record (written
 * before its abort word is raised, so that peers name the rank that failed first) and what a dead peer
 * left in /dev/shm. Every failure that makes the communicator unusable goes through {@link #markBroken}.
 *
 * <p>Reads the rank infos, abort records and status block of its {@link GpuConnection}, as far as
 * connect got: the connect failure path uses it too.
 */
final class GpuFailures {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    private final GpuConnection c;
    private final int rank;
    private final int size;
    private String brokenBy;
    private boolean closed;

    GpuFailures(GpuConnection connection) {
        this.c = connection;
        this.rank = connection.rank;
        this.size = connection.size;
    }

    // ---- Usable, broken, closed. -------------------------------------------------------------------

    /** Throws unless the communicator can take a call: closed, or broken by an earlier failure. */
    void checkUsable() {
        if (closed) {
            throw new IllegalStateException("rank " + rank + ": the GPU communicator is closed");
        }
        if (brokenBy != null) {
            throw new CclException("rank " + rank + ": the GPU communicator is unusable after an earlier failure ("
                    + brokenBy + "); close it and build a new one");
        }
    }

    /** Closed or broken: the peers already know, or will, that this rank takes no more part. */
    boolean closedOrBroken() {
        return closed || brokenBy != null;
    }

    boolean closed() {
        return closed;
    }

    /** From now on every call throws ({@link #checkUsable}); close frees what is left. */
    void markClosed() {
        closed = true;
    }

    /**
     * The communicator is unusable from now on, for the reason given. A rank that failed also takes no
     * more part in launching together: its peers go on and meet the failure.
     */
    void markBroken(String reason) {
        brokenBy = reason;
        if (c.launchGate != null) {
            c.launchGate.close();
        }
    }

    /** Raises this rank's host abort word: its kernels stop at their next poll and raise their ring neighbours'. */
    void raiseHostAbort() {
        c.statusView.putIntVolatile(DevCommLayout.STATUS_HOST_ABORT, 1);
    }

    // ---- Dead peers. -------------------------------------------------------------------------------

    /** The process {@code peer} describes has ended (it is another process than this one). */
    static boolean processEnded(RankInfo peer) {
        long pid = peer.pid();
        return pid != HostIdentity.pid() && !HostIdentity.isAlive(pid);
    }

    /** Rank r's process has ended (it is another process than this one). */
    boolean isDead(int r) {
        return processEnded(c.infos[r]);
    }

    /** The first rank whose process has ended, or -1. */
    int deadPeer() {
        for (int r = 0; r < size; r++) {
            if (isDead(r)) {
                return r;
            }
        }
        return -1;
    }

    private boolean anyPeerDead() {
        for (int r = 0; r < size; r++) {
            if (c.infos[r] != null && isDead(r)) {
                return true;
            }
        }
        return false;
    }

    /** Removes what every dead peer left in /dev/shm, waiting up to {@code graceNs} for a peer to be seen dead. */
    void cleanUpAfterDeadPeers(long graceNs) {
        if (c.infos == null) {
            return; // the ranks never met: their segment names are not known here (the stale scan removes them)
        }
        long deadline = System.nanoTime() + graceNs;
        while (!anyPeerDead() && System.nanoTime() < deadline) {
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(10));
        }
        for (int r = 0; r < size; r++) {
            if (c.infos[r] != null && isDead(r)) {
                cleanUpAfter(r);
            }
        }
    }

    /** Removes what dead rank {@code peer} left in /dev/shm (a window it had not unlinked yet). */
    private void cleanUpAfter(int peer) {
        if (c.shm != null) {
            c.shm.cleanUpAfter(c.infos[peer].pid());
        }
    }

    // ---- The error a failed call raises. -----------------------------------------------------------

    /**
     * A CUDA call that failed while this rank waited for its kernel, with a peer dead: the error names
     * the dead peer, and says that this process's CUDA context, which such an error breaks for good,
     * goes with it. (Every such loss measured in the kill trials was the Simple kernel's own null read
     * after the abort, fixed in ring_kernels.cu; windows are CUDA virtual memory, so a dead peer's
     * window stays mapped here: see GpuWindow.Device.)
     */
    CclException failedCuda(String call, CudaException cuda) {
        int dead = deadPeer();
        if (dead < 0) {
            return cuda;
        }
        cleanUpAfter(dead);
        String message = "rank " + rank + " on " + c.device.where() + ": " + call + " failed: rank " + dead
                + " (pid " + c.infos[dead].pid() + ") died during this call, and this rank's kernel failed ("
                + cuda.getMessage() + "); this communicator is unusable, and so is this process's CUDA"
                + " context after such an error: the process must be restarted (in Spark, the executor)";
        PeerFailedException e = new PeerFailedException(dead, message, cuda);
        record(e);
        markBroken(message);
        return e;
    }

    /** The failure of {@code call} (its description), from the kernel's status code or a dead peer. */
    CclException fail(String call, int code, int deadPeer) {
        String what = "rank " + rank + " on " + c.device.where() + ": " + call;
        CclException e;
        if (deadPeer >= 0) {
            cleanUpAfter(deadPeer);
            e = new PeerFailedException(deadPeer, what + " failed: rank " + deadPeer + " (pid " + c.infos[deadPeer].pid()
                    + ") died; this communicator is unusable: every rank must start again with a new one");
        } else if (code == DevCommLayout.CODE_MISMATCH) {
            // Both headers as the kernels sent them (their sequence numbers are the kernels' own counts).
            CollectiveHeader mine = CollectiveHeader.read(c.status.address() + DevCommLayout.STATUS_MY_HEADER);
            CollectiveHeader theirs = CollectiveHeader.read(c.status.address() + DevCommLayout.STATUS_THEIR_HEADER);
            int channel = c.statusView.getIntVolatile(DevCommLayout.STATUS_CHANNEL);
            int prev = c.rings.get(channel < c.rings.size() ? channel : 0).prev(rank);
            e = new CclException("rank " + rank + ": collective mismatch: this rank called "
                    + (mine == null ? call : mine.describe())
                    + " but rank " + prev + " called "
                    + (theirs == null ? "something else (unreadable header)" : theirs.describe())
                    + ": every rank must call the same collectives in the same order with the same count, type and op");
        } else if (code == DevCommLayout.CODE_TIMEOUT) {
            e = new CclTimeoutException(what + " timed out after " + TimeUnit.NANOSECONDS.toMillis(c.timeoutNs)
                    + " ms waiting for a peer (channel " + c.statusView.getIntVolatile(DevCommLayout.STATUS_CHANNEL)
                    + "); a rank may be stuck or may have skipped this collective (raise SPARKCCL_TIMEOUT_MS if the"
                    + " ranks are just slow)");
        } else if (code == DevCommLayout.CODE_KERNEL_LOST) {
            e = new CclException(what + ": the collective kernel ended without reporting completion (it was lost "
                    + "or crashed); run with compute-sanitizer to find out why");
        } else if (code == DevCommLayout.CODE_PEER_ABORT) {
            PeerFailedException named = c.abortRecords == null ? null
                    : c.abortRecords.awaitPeerAbort("while this rank waited for " + call, GpuAbortRecords.RECORD_WAIT_MS);
            // Unnamed, it is not recorded: a peer reading this rank's record would take this rank for the cause.
            e = named != null ? named : new CclException(what + " aborted because another rank failed; that rank's "
                    + "error says why");
            if (named == null) {
                markBroken(e.getMessage());
                return e;
            }
        } else {
            e = new CclTimeoutException(what + " did not finish within SPARKCCL_TIMEOUT_MS plus 10 s; it was stopped");
        }
        record(e);
        markBroken(e.getMessage());
        return e;
    }

    // ---- Abort records. ----------------------------------------------------------------------------

    /**
     * Writes {@code e} to this rank's abort record, where peers read why it failed; the rank it names
     * as the cause is the peer that failed first (a {@link PeerFailedException}'s), else this rank.
     */
    void record(CclException e) {
        if (c.abortRecords != null) {
            c.abortRecords.markAborted(e instanceof PeerFailedException ? ((PeerFailedException) e).failedRank() : rank,
                    String.valueOf(e.getMessage()));
        }
    }

    /**
     * A failure of this rank's own (its task cancelled or killed, its wait interrupted), recorded for
     * its peers before it raises its abort word. A peer whose record says it failed before is the cause
     * (Spark kills the rest of a barrier stage because one task failed): then the error, and the
     * record, name that peer; {@code when} says what this rank was doing.
     */
    CclException ownFailure(String message, String when) {
        PeerFailedException before = c.abortRecords == null ? null : c.abortRecords.peerAbort(when);
        CclException e = before == null ? new CclException(message)
                : new PeerFailedException(before.failedRank(), message + "; before that: " + before.getMessage(), before);
        record(e);
        return e;
    }

    /**
     * {@link GpuCommunicator#abort}: this rank failed between its collectives. Its record says why, then
     * its abort word goes up, so that peers in or entering a collective with it stop naming it.
     */
    void abortBetweenCollectives(String reason) {
        if (closed || brokenBy != null || size == 1) {
            return;
        }
        CclException e = ownFailure("rank " + rank + ": " + reason, "while this rank was between collectives");
        markBroken(e.getMessage());
        raiseHostAbort();
    }
}
