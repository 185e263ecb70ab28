package org.sparkccl.core.net;

import java.net.InetSocketAddress;
import java.util.function.BooleanSupplier;
import org.sparkccl.core.wait.FailureCheck;

/**
 * This rank's place in one ring over TCP: {@code connections} links to its successor and as many
 * from its predecessor, each with its own FIFO and I/O thread. Steps go round the links in turn, the
 * same on both ends. As the failure check of the ring's waits it reports a broken link: a peer that
 * died (end of stream, reset) is named within milliseconds, without waiting for the timeout.
 */
final class SocketRing implements FailureCheck, AutoCloseable {
    /** How long close waits for the writers to send what the last collective left in their FIFOs. */
    private static final long DRAIN_MS = 5_000;
    final int rank;
    final int prev;
    final int next;
    final SendLink[] out;
    final RecvLink[] in;
    /** The number of the collective running now, set by the rank's thread at its start. */
    private long call;

    private SocketRing(int rank, int prev, int next, int connections) {
        this.rank = rank;
        this.prev = prev;
        this.next = next;
        this.out = new SendLink[connections];
        this.in = new RecvLink[connections];
    }

    /**
     * Connects to {@code next} at {@code nextAddress} and takes {@code prev}'s connections from the
     * listener (ranks are global: as in the bootstrap round). Throws, closing what it opened, on failure.
     */
    static SocketRing connect(SocketListener listener, int rank, int prev, int next, InetSocketAddress nextAddress,
                              int tag, int connections, int steps, int slotBytes, long deadlineNs,
                              BooleanSupplier cancelled) {
        SocketRing ring = new SocketRing(rank, prev, next, connections);
        try {
            for (int i = 0; i < connections; i++) {
                ring.out[i] = new SendLink(rank, next, SocketListener.connect(nextAddress, listener.secret(), tag, rank,
                        next, i, deadlineNs), steps, slotBytes);
            }
            for (int i = 0; i < connections; i++) {
                ring.in[i] = new RecvLink(rank, prev, listener.take(tag, prev, i, deadlineNs, cancelled), steps, slotBytes);
            }
            return ring;
        } catch (RuntimeException e) {
            ring.close();
            throw e;
        }
    }

    /** The rank starts collective number {@code call}: a predecessor that aborted after completing it does not fail it. */
    void beginCall(long call) {
        this.call = call;
    }

    @Override
    public void check(int awaitedPeer, long step, String waitingFor) {
        for (SendLink link : out) {
            link.checkFailure();
        }
        for (RecvLink link : in) {
            // What arrived before a link ended may still be consumed: only an empty one is a failure now,
            // and not where the predecessor completed this call before it aborted.
            if (link.tail.get() == link.head.get() && !link.failedAfter(call)) {
                link.checkFailure();
            }
        }
    }

    /** Tells the successor (and through it the rest of the ring) that this rank failed, and why. */
    void abort(int originRank, long completedCalls, String message) {
        for (SendLink link : out) {
            if (link != null) {
                link.abort(originRank, completedCalls, message);
            }
        }
    }

    @Override
    public void close() {
        long drainUntil = System.currentTimeMillis() + DRAIN_MS;
        for (SocketLink link : out) {
            if (link != null) {
                link.shutDown(drainUntil - System.currentTimeMillis());
            }
        }
        for (SocketLink link : in) {
            if (link != null) {
                link.shutDown(0);
            }
        }
    }
}
