package org.sparkccl.core.net;

import java.io.IOException;
import java.nio.channels.Selector;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.function.BooleanSupplier;
import org.sparkccl.core.CclException;
import org.sparkccl.core.DataType;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.copy.BulkCopy;
import org.sparkccl.core.proto.CollectiveHeader;
import org.sparkccl.core.reduce.Reduction;
import org.sparkccl.core.transport.RankInfo;
import org.sparkccl.core.wait.WaitLoop;

/**
 * The small all-reduce over TCP: recursive doubling over {@link DirectLink}s, as OpenMPI's
 * {@code allreduce_intra_recursivedoubling}. With p the largest power of two up to n and r = n - p,
 * the first 2r ranks pair up first (the even one sends its data to the odd one and later receives
 * the result from it); the p ranks left then exchange their whole vector with the rank whose index
 * differs in one bit, for each of the log2(p) bits, each reducing what it received into its own.
 * Every rank so ends with the same bits (the ops are commutative: a + b and b + a round alike).
 *
 * <p>Against the ring, a small call saves hops (log2 n exchanges instead of 2(n - 1) steps; 2 ranks:
 * one exchange instead of two steps and the header's trip) and hand-offs: the rank's own thread
 * writes each frame in one gathering write and reads its partner's socket itself, polling it for
 * {@code pollNs}, then asleep in a selector that the bytes wake, so no reader thread stands between
 * the socket and the reduction. The price: log2 n times the data per rank where the ring sends 2(n -
 * 1)/n, which is why it serves small calls only ({@code SPARKCCL_SOCKET_SMALL_BYTES}). Larger calls,
 * up to {@code SPARKCCL_SOCKET_HALVING_BYTES}, go over the same links by {@link #halveThenDouble}:
 * the ring's bytes, still without I/O threads (2 ranks, 1 MB, loopback, 2 cores: 200-270 us a call
 * against the ring's 420-460, docs/perf/socket-allreduce-notes.md). Beyond that the ring wins: its I/O
 * threads keep the socket busy while the rank reduces (2 ranks, 4 MB: 2.4 against 6.4 ms a call).
 *
 * <p>Failures as on the ring: every frame carries the sender's headers, checked before its data is
 * used (a partner in another call fails both at once); a partner that dies ends its stream, seen at
 * once, even while this rank waits for another partner; aborts and closes travel as the ring's
 * control frames; and while it waits the rank checks the ring ({@code WaitLoop}'s failure check and
 * the collective's own check, which catches a predecessor running this call over the ring).
 */
final class RecursiveDoubling implements AutoCloseable {
    /** Connection index of the direct links in the handshake, apart from the ring's 0 .. k-1. */
    static final int LINK_INDEX = 1 << 16;
    private static final long SELECT_MS = 5;
    private final int pos;
    private final int n;
    /** Links by the partner's place in the group; null where it is not a partner. */
    private final DirectLink[] byPos;
    private final List<DirectLink> links = new ArrayList<>();
    private final Selector selector;
    private final WaitLoop wait;
    private final long pollNs;
    private final boolean yieldWhilePolling;
    private final int maxBytes;
    /** Calls of more bytes than this go by {@link #halveThenDouble}; up to it, by doubling the whole vector. */
    private final int halvingFromBytes;
    /** The window of elements each halving level split, for the all-gather to retrace. */
    private final long[] windowLo = new long[32];
    private final long[] windowHi = new long[32];
    /** The number of the collective running now (see {@link DirectLink#readSome}). */
    private long call;

    private RecursiveDoubling(int pos, int n, WaitLoop wait, long pollNs, boolean yieldWhilePolling, int maxBytes,
                              int halvingFromBytes) throws IOException {
        this.halvingFromBytes = halvingFromBytes;
        this.yieldWhilePolling = yieldWhilePolling;
        this.pos = pos;
        this.n = n;
        this.byPos = new DirectLink[n];
        this.wait = wait;
        this.pollNs = pollNs;
        this.maxBytes = maxBytes;
        this.selector = Selector.open();
    }

    /**
     * Connects this rank (place {@code pos} in {@code group}, global ranks) with its partners: the
     * lower of two connects, the higher takes it from its listener. Collective: every rank of the group.
     */
    static RecursiveDoubling connect(SocketListener listener, RankInfo[] all, int[] group, int pos, int tag,
                                     int maxBytes, int halvingFromBytes, long pollNs, boolean yieldWhilePolling, WaitLoop wait,
                                     long deadlineNs, BooleanSupplier cancelled) {
        RecursiveDoubling rd;
        try {
            rd = new RecursiveDoubling(pos, group.length, wait, pollNs, yieldWhilePolling, maxBytes, halvingFromBytes);
        } catch (IOException e) {
            throw new CclException("rank " + group[pos] + ": cannot open a selector for the direct connections: " + e, e);
        }
        try {
            int me = group[pos];
            for (int partner : partners(pos, group.length)) {
                if (partner > pos) {
                    rd.add(partner, new DirectLink(me, group[partner], SocketListener.connect(NetRound.address(all[group[partner]]),
                            listener.secret(), tag, me, group[partner], LINK_INDEX, deadlineNs), maxBytes));
                }
            }
            for (int partner : partners(pos, group.length)) {
                if (partner < pos) {
                    rd.add(partner, new DirectLink(me, group[partner], listener.take(tag, group[partner], LINK_INDEX,
                            deadlineNs, cancelled), maxBytes));
                }
            }
            return rd;
        } catch (IOException e) {
            rd.close();
            throw new CclException("rank " + group[pos] + ": cannot register the direct connections: " + e, e);
        } catch (RuntimeException e) {
            rd.close();
            throw e;
        }
    }

    private void add(int partner, DirectLink link) throws IOException {
        byPos[partner] = link;
        links.add(link);
        link.register(selector);
    }

    /** The places of {@code pos}'s partners in a group of {@code n}, in the order it meets them. */
    static Set<Integer> partners(int pos, int n) {
        Set<Integer> out = new LinkedHashSet<>();
        int p = Integer.highestOneBit(n);
        int rem = n - p;
        int newRank;
        if (pos < 2 * rem) {
            if (pos % 2 == 0) {
                out.add(pos + 1);
                return out;
            }
            out.add(pos - 1);
            newRank = pos / 2;
        } else {
            newRank = pos - rem;
        }
        for (int mask = 1; mask < p; mask <<= 1) {
            out.add(place(newRank ^ mask, rem));
        }
        return out;
    }

    /** Group place of the rank numbered {@code newRank} among the p that exchange. */
    private static int place(int newRank, int rem) {
        return newRank < rem ? newRank * 2 + 1 : newRank + rem;
    }

    int maxBytes() {
        return maxBytes;
    }

    /**
     * All-reduces {@code count} elements of {@code send} into {@code recv} (may be the same), with
     * {@code headers} (this rank's two collective headers, 64 bytes) on every frame, which {@code
     * check} compares with each partner's. At most {@link #maxBytes}. {@code call} is this call's
     * number: a partner that aborts after completing it does not fail it here.
     */
    void allReduce(long call, long headers, long send, long recv, long count, DataType type, ReduceOp op,
                   HeaderCheck check) {
        this.call = call;
        int bytes = (int) (count * type.size());
        int p = Integer.highestOneBit(n);
        int rem = n - p;
        long cur = send;
        int newRank;
        int step = 0;
        if (pos < 2 * rem) {
            DirectLink partner;
            if (pos % 2 == 0) {
                // Hands its data to the odd neighbour, which takes its place, and waits for the result.
                partner = byPos[pos + 1];
                partner.startFrame(headers, send, bytes);
                await(partner, true, bytes, step);
                check.check(partner, bytes);
                if (bytes > 0) {
                    BulkCopy.copy(partner.bodyAddress(), recv, bytes);
                }
                partner.consumed();
                return;
            }
            partner = byPos[pos - 1];
            await(partner, true, bytes, step++);
            check.check(partner, bytes);
            Reduction.reduce(type, op, partner.bodyAddress(), send, recv, count);
            partner.consumed();
            cur = recv;
            newRank = pos / 2;
        } else {
            newRank = pos - rem;
        }
        if (bytes > halvingFromBytes && p > 1) {
            halveThenDouble(headers, cur, recv, count, type, op, check, newRank, rem, step);
            step += 2 * Integer.numberOfTrailingZeros(p);
        } else {
            for (int mask = 1; mask < p; mask <<= 1) {
                DirectLink partner = byPos[place(newRank ^ mask, rem)];
                partner.startFrame(headers, cur, bytes);
                // Both: the frame must be out before recv, which it may be, is written.
                await(partner, true, bytes, step++);
                check.check(partner, bytes);
                Reduction.reduce(type, op, partner.bodyAddress(), cur, recv, count);
                partner.consumed();
                cur = recv;
            }
            if (op == ReduceOp.AVG) {
                Reduction.divide(type, recv, count, n);
            }
        }
        if (pos < 2 * rem) {
            DirectLink partner = byPos[pos - 1];
            partner.startFrame(headers, recv, bytes);
            await(partner, false, bytes, step);
        }
    }

    /**
     * The exchanges of the p ranks for larger calls (Rabenseifner's, as OpenMPI's tuned all-reduce for
     * larger counts): a reduce-scatter by recursive halving, then an all-gather by recursive doubling,
     * with the same partners as {@link #allReduce}'s doubling. At each of the log2 p halving steps a
     * rank sends its partner the half of its window that the partner keeps and reduces the other half
     * with what the partner sent; the all-gather then retraces the steps backwards, each rank sending
     * its reduced window and copying in its partner's. Each rank so sends (p - 1)/p of the vector each
     * way, 2(p - 1)/p in all, as the ring does, where the doubling sends log2 p times it, in 2 log2 p
     * exchanges where the ring needs 2(p - 1) steps and its I/O threads' hand-offs. {@code cur} holds
     * this rank's data so far (the caller's, or its pair's sum); the result is in {@code recv}.
     */
    private void halveThenDouble(long headers, long cur, long recv, long count, DataType type, ReduceOp op,
                                 HeaderCheck check, int newRank, int rem, int step) {
        int es = type.size();
        int p = Integer.highestOneBit(n);
        int levels = Integer.numberOfTrailingZeros(p);
        long lo = 0;
        long hi = count;
        for (int level = 0; level < levels; level++) {
            int mask = 1 << level;
            DirectLink partner = byPos[place(newRank ^ mask, rem)];
            long mid = lo + (hi - lo) / 2;
            boolean keepLow = (newRank & mask) == 0; // both ends split alike: the lower rank keeps the lower half
            long sendLo = keepLow ? mid : lo;
            long sendHi = keepLow ? hi : mid;
            long keepLo = keepLow ? lo : mid;
            long keepHi = keepLow ? mid : hi;
            windowLo[level] = lo;
            windowHi[level] = hi;
            partner.startFrame(headers, cur + sendLo * es, (int) ((sendHi - sendLo) * es));
            int expected = (int) ((keepHi - keepLo) * es);
            // Both: the frame, read from cur (which may be recv), must be out before recv is written.
            await(partner, true, expected, step++);
            check.check(partner, expected);
            Reduction.reduce(type, op, partner.bodyAddress(), cur + keepLo * es, recv + keepLo * es, keepHi - keepLo);
            partner.consumed();
            cur = recv;
            lo = keepLo;
            hi = keepHi;
        }
        if (op == ReduceOp.AVG) {
            Reduction.divide(type, recv + lo * es, hi - lo, n);
        }
        for (int level = levels - 1; level >= 0; level--) {
            int mask = 1 << level;
            DirectLink partner = byPos[place(newRank ^ mask, rem)];
            long parentLo = windowLo[level];
            long parentHi = windowHi[level];
            // The partner holds the other half of the window both held before this level's halving.
            boolean keptLow = (newRank & mask) == 0;
            long otherLo = keptLow ? hi : parentLo;
            long otherHi = keptLow ? parentHi : lo;
            partner.startFrame(headers, recv + lo * es, (int) ((hi - lo) * es));
            int expected = (int) ((otherHi - otherLo) * es);
            await(partner, true, expected, step++);
            check.check(partner, expected);
            if (expected > 0) {
                BulkCopy.copy(partner.bodyAddress(), recv + otherLo * es, expected);
            }
            partner.consumed();
            lo = parentLo;
            hi = parentHi;
        }
    }

    /** Checks a received frame's headers and length against this rank's call, before its data is used. */
    @FunctionalInterface
    interface HeaderCheck {
        void check(DirectLink from, int expectedBytes);
    }

    /**
     * Waits until {@code link}'s frame went out and, with {@code receive}, its peer's next frame
     * arrived whole: polls the socket for {@code pollNs}, then sleeps in the selector, which also
     * wakes for the other partners' bytes (their aborts and deaths end the wait at once).
     */
    private void await(DirectLink link, boolean receive, int bytes, int step) {
        long pollUntil = 0;
        boolean polling = pollNs > 0;
        try {
            while (true) {
                boolean progress = link.writeSome();
                if (receive) {
                    progress |= link.readSome(true, bytes, call);
                }
                if ((!receive || link.complete()) && !link.writePending()) {
                    return;
                }
                if (progress) {
                    continue;
                }
                if (polling) {
                    long now = System.nanoTime();
                    if (pollUntil == 0) {
                        pollUntil = now + pollNs;
                    }
                    if (now - pollUntil < 0) {
                        if (yieldWhilePolling) {
                            Thread.yield(); // ranks outnumber cores: the partner may need this one
                        } else {
                            Thread.onSpinWait();
                        }
                        wait.poll(link.peer, step, receive ? link.waitingForData : link.waitingForRoom);
                        continue;
                    }
                    polling = false;
                }
                for (DirectLink l : links) {
                    l.updateInterest();
                }
                selector.select(SELECT_MS);
                selector.selectedKeys().clear();
                // Every partner's bytes: an abort or a death ends this wait (unless the partner completed
                // this call first); a frame for later is kept.
                for (DirectLink l : links) {
                    if (l != link || !receive) {
                        l.readSome(false, -1, call);
                    }
                }
                wait.checkNow(link.peer, step, receive ? link.waitingForData : link.waitingForRoom);
            }
        } catch (IOException e) {
            throw new CclException("rank " + link.rank + ": waiting for " + link.peerName + " in a selector failed: " + e, e);
        } finally {
            wait.done();
        }
    }

    /** Tells every partner that this rank failed, and why, and how many collectives it completed first. */
    void abort(int originRank, long completedCalls, String message) {
        for (DirectLink l : links) {
            l.sendControl(originRank, completedCalls, message);
        }
    }

    @Override
    public void close() {
        for (DirectLink l : links) {
            l.sendControl(0, 0, null);
            l.close();
        }
        try {
            selector.close();
        } catch (IOException e) {
            // nothing to do: the links are closed anyway
        }
    }
}
