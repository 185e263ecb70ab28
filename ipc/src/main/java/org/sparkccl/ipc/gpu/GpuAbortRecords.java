package org.sparkccl.ipc.gpu;

import java.util.concurrent.TimeUnit;
import org.agrona.concurrent.AtomicBuffer;
import org.sparkccl.core.PeerFailedException;
import org.sparkccl.core.proto.SegmentLayout;
import org.sparkccl.core.transport.ExposedRegion;
import org.sparkccl.core.transport.HostIdentity;
import org.sparkccl.core.transport.RankInfo;
import org.sparkccl.core.transport.SharedRegion;
import org.sparkccl.core.transport.PeerMonitor;
import org.sparkccl.core.shm.ShmTransport;

/**
 * Why a rank of a GPU communicator failed, where its peers in other processes can read it: one page
 * of /dev/shm per rank, laid out as the CPU engine's control block ({@link SegmentLayout}: state, the
 * rank whose failure came first, the message), which every peer maps when the communicator is built.
 * The kernels' abort words only say that some rank stopped. A rank writes its record before it raises
 * its own abort word, so a peer whose kernel stopped for another rank's abort, or whose wait looks at
 * the records (every 50 ms, as it looks for dead processes), names that rank and its reason: a failed
 * collective, or its Spark task failing between collectives ({@code GpuCommunicator.abort}).
 *
 * <p>A record names the rank that failed first (a rank that fails because a peer did names that
 * peer), as the CPU engine's control block does. Each peer counts itself in the record's attached
 * word once it has mapped it; the owner removes the name when they all have (looked at on each call,
 * not waited for), so a process SIGKILLed later leaves nothing in /dev/shm. Before that, survivors
 * remove a dead owner's record with its other segments (ShmTransport.cleanUpAfter).
 */
final class GpuAbortRecords implements AutoCloseable {
    /** How long a rank whose kernel stopped for a peer's abort waits for that peer's record. */
    static final long RECORD_WAIT_MS = 1_000;
    private static final long RECORD_POLL_MS = 5;

    private final int rank;
    private final ExposedRegion own;
    /** Each rank's record (this rank's own included); null before {@link #open} and for ranks without one. */
    private SharedRegion[] records;
    /** Peers that will map this rank's record: those that have records of their own. */
    private int openers;
    private boolean nameRemoved;

    /** This rank's record, not yet read by anybody: its blob goes into the rank's description. */
    GpuAbortRecords(ShmTransport shm, int rank) {
        this.rank = rank;
        this.own = shm.expose(SegmentLayout.CONTROL_BYTES, "abort record of GPU rank " + rank);
        AtomicBuffer b = own.buffer();
        b.putLong(SegmentLayout.MAGIC_OFFSET, SegmentLayout.MAGIC);
        b.putInt(SegmentLayout.VERSION_OFFSET, SegmentLayout.VERSION);
        b.putLong(SegmentLayout.PID_OFFSET, HostIdentity.pid());
        b.putIntVolatile(SegmentLayout.STATE_OFFSET, SegmentLayout.STATE_RUNNING);
    }

    byte[] connectBlob() {
        return own.connectBlob();
    }

    /**
     * Maps every peer's record; {@code blobs[r]} is rank r's connect blob, null where rank r has none
     * (its /dev/shm is disabled): that rank's failures are then reported without its reason.
     */
    void open(ShmTransport shm, RankInfo[] infos, byte[][] blobs) {
        SharedRegion[] opened = new SharedRegion[infos.length];
        opened[rank] = own;
        try {
            for (int r = 0; r < infos.length; r++) {
                if (r != rank && blobs[r] != null) {
                    opened[r] = shm.open(blobs[r], infos[r]);
                    opened[r].buffer().getAndAddLong(SegmentLayout.ATTACHED_OFFSET, 1);
                    openers++;
                }
            }
        } catch (RuntimeException e) {
            for (int r = 0; r < opened.length; r++) {
                if (r != rank && opened[r] != null) {
                    opened[r].close();
                }
            }
            throw e;
        }
        records = opened;
    }

    /** Removes this rank's record from /dev/shm once every peer has mapped it (they keep their mappings). */
    void removeNameOnceEveryPeerMappedIt() {
        if (!nameRemoved && records != null && own.buffer().getLongVolatile(SegmentLayout.ATTACHED_OFFSET) >= openers) {
            own.unlinkName();
            nameRemoved = true;
        }
    }

    /**
     * Writes why this rank failed, once (a later failure keeps the first reason); {@code originRank}
     * is the rank whose failure came first: this rank, or the peer it failed for.
     */
    void markAborted(int originRank, String message) {
        PeerMonitor.markAborted(own.buffer(), originRank, message);
    }

    /** True once this rank wrote its record. */
    boolean aborted() {
        return own.buffer().getIntVolatile(SegmentLayout.STATE_OFFSET) == SegmentLayout.STATE_ABORTED;
    }

    /**
     * The first peer (by rank) whose record says it aborted, as the error this rank reports, naming
     * the rank that failed first; {@code when} says what this rank was doing ("while this rank waited
     * for allReduce #3 .."). Null when no peer aborted.
     */
    PeerFailedException peerAbort(String when) {
        if (records == null) {
            return null;
        }
        for (int p = 0; p < records.length; p++) {
            if (p == rank || records[p] == null) {
                continue;
            }
            AtomicBuffer b = records[p].buffer();
            if (b.getIntVolatile(SegmentLayout.STATE_OFFSET) == SegmentLayout.STATE_ABORTED) {
                int origin = b.getIntVolatile(SegmentLayout.ABORT_RANK_OFFSET);
                return new PeerFailedException(origin, "rank " + rank + ": rank " + p + " aborted " + when + ": "
                        + PeerMonitor.readMessage(b));
            }
        }
        return null;
    }

    /**
     * {@link #peerAbort}, waiting up to {@code maxMs} for a record to appear: a kernel stops for a
     * peer's abort word as soon as the peer's kernel raised it, which can be before that peer's host
     * thread learnt why and wrote its record (a mismatch, a timeout found by its kernel).
     */
    PeerFailedException awaitPeerAbort(String when, long maxMs) {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(maxMs);
        while (true) {
            PeerFailedException e = peerAbort(when);
            if (e != null || records == null || System.nanoTime() - deadline > 0) {
                return e;
            }
            try {
                Thread.sleep(RECORD_POLL_MS);
            } catch (InterruptedException interrupted) {
                Thread.currentThread().interrupt();
                return peerAbort(when);
            }
        }
    }

    /** Unmaps the peers' records and removes this rank's (peers keep their mappings of it). */
    @Override
    public void close() {
        if (records != null) {
            for (int r = 0; r < records.length; r++) {
                if (r != rank && records[r] != null) {
                    records[r].close();
                }
            }
            records = null;
        }
        own.close();
    }
}
