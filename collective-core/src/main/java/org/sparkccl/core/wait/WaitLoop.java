package org.sparkccl.core.wait;

import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.agrona.concurrent.IdleStrategy;
import org.sparkccl.core.CclException;
import org.sparkccl.core.CclTimeoutException;

/**
 * Every wait of a collective goes through here: the idle strategy (spin, then yield, then park with
 * growing pauses) and, every few hundred idles, the checks that keep a wait from hanging forever:
 * the collective's timeout, dead or aborted peers, interruption of the calling thread and the
 * caller's own cancellation signal (Spark task kill). One per waiting thread: not thread safe.
 *
 * <p>Use: {@code while (!ready()) wait.idle(peer, step, "LL data"); wait.done();}
 */
public final class WaitLoop {
    private static final int CHECK_EVERY_IDLES = 256;
    private static final long FAILURE_CHECK_INTERVAL_NS = TimeUnit.MILLISECONDS.toNanos(50);
    private final int rank;
    private final IdleStrategy idle;
    private final long timeoutNs;
    private final FailureCheck failureCheck;
    private final BooleanSupplier cancelled;
    private long deadlineNs;
    private long nextFailureCheckNs;
    private boolean clockStarted;
    private int idles;
    /** Names the collective in errors; its toString() runs only when an error is built. */
    private Object collective = "";
    private FailureCheck collectiveCheck;
    /** The awaited peer was seen closed once in this wait: the next sighting ends it. */
    private boolean awaitedPeerClosed;

    public WaitLoop(int rank, int spinsBeforeYield, long timeoutMs, FailureCheck failureCheck, BooleanSupplier cancelled) {
        this.rank = rank;
        // Spins, then yields for 20 ms (ranks may outnumber cores), then parks of 1 us doubling to 200 us.
        this.idle = new SpinYieldPark(spinsBeforeYield, SpinYieldPark.DEFAULT_YIELD_NANOS,
                TimeUnit.MICROSECONDS.toNanos(1), TimeUnit.MICROSECONDS.toNanos(200));
        this.timeoutNs = TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        this.failureCheck = failureCheck;
        this.cancelled = cancelled;
    }

    /** Starts the timeout of one collective; {@code description} names it in errors. */
    public void startCollective(Object description) {
        startCollective(description, null);
    }

    /**
     * As {@link #startCollective(Object)}, with a check of the collective's own that runs with the
     * failure checks while it waits (e.g. for peers that run a different call); null for none.
     */
    public void startCollective(Object description, FailureCheck check) {
        // The clock starts at the first check (after CHECK_EVERY_IDLES idles, microseconds in), not
        // here: a small collective that never waits long then never reads the clock at all.
        clockStarted = false;
        awaitedPeerClosed = false;
        collective = description;
        collectiveCheck = check;
    }

    /** One idle round while waiting for {@code peer} at {@code step}; throws when the wait cannot end well. */
    public void idle(int peer, long step, String waitingFor) {
        idle.idle();
        if (++idles % CHECK_EVERY_IDLES == 0) {
            checks(peer, step, waitingFor);
        }
    }

    /**
     * One round of a wait that idles elsewhere (polling a socket, or asleep in a selector that
     * returned): the checks {@link #idle} makes, as often, without its idling.
     */
    public void poll(int peer, long step, String waitingFor) {
        if (++idles % CHECK_EVERY_IDLES == 0) {
            checks(peer, step, waitingFor);
        }
    }

    /** As {@link #poll}, checking now (after a wait of its own that took a while: a selector's timeout). */
    public void checkNow(int peer, long step, String waitingFor) {
        idles++;
        checks(peer, step, waitingFor);
    }

    /** The condition was met: the next wait starts spinning again. */
    public void done() {
        awaitedPeerClosed = false;
        if (idles != 0) {
            idles = 0;
            idle.reset();
        }
    }

    private void checks(int peer, long step, String waitingFor) {
        long now = System.nanoTime();
        if (!clockStarted) {
            clockStarted = true;
            deadlineNs = now + timeoutNs;
            nextFailureCheckNs = now + FAILURE_CHECK_INTERVAL_NS;
        }
        if (now - deadlineNs > 0) {
            throw new CclTimeoutException("rank " + rank + ": " + collective + " timed out after "
                    + TimeUnit.NANOSECONDS.toMillis(timeoutNs) + " ms waiting for " + waitingFor + fromPeer(peer)
                    + " at step " + step + "; a rank may be stuck or may have skipped this collective"
                    + " (raise SPARKCCL_TIMEOUT_MS if the ranks are just slow)");
        }
        boolean interrupted = Thread.currentThread().isInterrupted();
        if (interrupted || now - nextFailureCheckNs > 0) {
            nextFailureCheckNs = now + FAILURE_CHECK_INTERVAL_NS;
            // The peer checks' errors name the collective too: a survivor's message must say which call
            // the dead rank broke. Built at most every 50 ms, and only in a wait that lasts that long.
            String what = String.valueOf(collective).isEmpty() ? waitingFor : waitingFor + " in " + collective;
            if (interrupted || cancelled.getAsBoolean()) {
                // A peer that failed first is the cause: a caller that stops the rest of a group when one
                // rank fails (Spark with a barrier stage) stops the others only after that failure.
                try {
                    failureCheck.check(peer, step, what);
                } catch (PeerClosedException e) {
                    // not a failure of the peer's: the cancellation is the reason
                }
                throw new CclException("rank " + rank + ": " + collective
                        + (interrupted ? " interrupted" : " cancelled (task killed)") + " while waiting for "
                        + waitingFor + fromPeer(peer) + " at step " + step);
            }
            try {
                failureCheck.check(peer, step, what);
            } catch (PeerClosedException e) {
                // The peer may have met the condition and closed after the caller last looked at it:
                // the caller looks once more, and the next check ends the wait if it still goes on.
                if (!awaitedPeerClosed) {
                    awaitedPeerClosed = true;
                    return;
                }
                throw e;
            }
            if (collectiveCheck != null) {
                collectiveCheck.check(peer, step, waitingFor);
            }
        }
    }

    /** " from rank N" for a wait on one peer; nothing for a wait on all of them (peer -1, e.g. in communicator init). */
    public static String fromPeer(int peer) {
        return peer < 0 ? "" : " from rank " + peer;
    }
}
