package org.sparkccl.core.transport;

import org.sparkccl.core.wait.FailureCheck;
import org.sparkccl.core.wait.PeerClosedException;
import org.sparkccl.core.wait.WaitLoop;
import java.nio.charset.StandardCharsets;
import java.util.function.LongConsumer;
import org.agrona.concurrent.AtomicBuffer;
import org.sparkccl.core.CclException;
import org.sparkccl.core.PeerFailedException;
import org.sparkccl.core.proto.SegmentLayout;

/**
 * Watches every peer's control block ({@link SegmentLayout}): a peer that aborted, a peer whose
 * process is gone without having closed cleanly, and the awaited peer having closed its
 * communicator all end the wait with an error naming that peer. Also writes this rank's own abort.
 */
public final class PeerMonitor implements FailureCheck {
    private final int rank;
    private final RankInfo[] infos;
    private final AtomicBuffer[] controls;
    private final LongConsumer onDeadProcess;
    private final long myPid = HostIdentity.pid();

    /** {@code controls[r]} is rank r's region (this rank's own included); {@code onDeadProcess} cleans up after a pid. */
    public PeerMonitor(int rank, RankInfo[] infos, AtomicBuffer[] controls, LongConsumer onDeadProcess) {
        this.rank = rank;
        this.infos = infos;
        this.controls = controls;
        this.onDeadProcess = onDeadProcess;
    }

    @Override
    public void check(int awaitedPeer, long step, String waitingFor) {
        boolean awaitedPeerClosed = false;
        for (int p = 0; p < controls.length; p++) {
            AtomicBuffer control = controls[p];
            if (p == rank) {
                if (control.getIntVolatile(SegmentLayout.STATE_OFFSET) == SegmentLayout.STATE_ABORTED) {
                    // Another channel of this rank failed first: stop waiting, its error is the one that counts.
                    throw new CclException("rank " + rank + ": aborted: " + readMessage(control));
                }
                continue;
            }
            int state = control.getIntVolatile(SegmentLayout.STATE_OFFSET);
            if (state == SegmentLayout.STATE_ABORTED) {
                int origin = control.getIntVolatile(SegmentLayout.ABORT_RANK_OFFSET);
                throw new PeerFailedException(origin, "rank " + rank + ": rank " + p + " aborted while this rank waited for "
                        + waitingFor + WaitLoop.fromPeer(awaitedPeer) + " at step " + step + ": " + readMessage(control));
            }
            if (state == SegmentLayout.STATE_CLOSED) {
                awaitedPeerClosed |= p == awaitedPeer;
                continue;
            }
            checkAlive(p, awaitedPeer, step, waitingFor);
        }
        // Last: a peer that aborted or died is a better reason than the closed one.
        if (awaitedPeerClosed) {
            throw new PeerClosedException("rank " + rank + ": rank " + awaitedPeer + " closed its communicator while this"
                    + " rank waited for " + waitingFor + " from it at step " + step + "; did rank " + awaitedPeer
                    + " skip a collective that this rank called?");
        }
    }

    private void checkAlive(int p, int awaitedPeer, long step, String waitingFor) {
        long pid = infos[p].pid();
        if (pid != myPid && !HostIdentity.isAlive(pid)) {
            onDeadProcess.accept(pid);
            throw new PeerFailedException(p, "rank " + rank + ": rank " + p + " (pid " + pid + ") died while this rank "
                    + "waited for " + waitingFor + WaitLoop.fromPeer(awaitedPeer) + " at step " + step
                    + "; this communicator is unusable: every rank must start again with a new one");
        }
    }

    /** Marks this rank aborted with {@code message}, once; peers see it within their next check. */
    public static void markAborted(AtomicBuffer ownControl, int originRank, String message) {
        if (ownControl.getIntVolatile(SegmentLayout.STATE_OFFSET) != SegmentLayout.STATE_RUNNING) {
            return;
        }
        byte[] bytes = message.getBytes(StandardCharsets.UTF_8);
        int n = Math.min(bytes.length, SegmentLayout.MESSAGE_MAX);
        ownControl.putBytes(SegmentLayout.MESSAGE_OFFSET, bytes, 0, n);
        ownControl.putIntVolatile(SegmentLayout.MESSAGE_LENGTH_OFFSET, n);
        ownControl.putIntVolatile(SegmentLayout.ABORT_RANK_OFFSET, originRank);
        ownControl.putIntVolatile(SegmentLayout.STATE_OFFSET, SegmentLayout.STATE_ABORTED);
    }

    /** The message a rank wrote with {@link #markAborted}. */
    public static String readMessage(AtomicBuffer control) {
        int n = Math.min(Math.max(control.getIntVolatile(SegmentLayout.MESSAGE_LENGTH_OFFSET), 0), SegmentLayout.MESSAGE_MAX);
        byte[] bytes = new byte[n];
        control.getBytes(SegmentLayout.MESSAGE_OFFSET, bytes);
        return new String(bytes, StandardCharsets.UTF_8);
    }
}
