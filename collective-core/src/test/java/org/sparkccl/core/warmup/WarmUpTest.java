package org.sparkccl.core.warmup;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.bootstrap.ThreadGroupBootstrap;
import org.sparkccl.core.memory.HostStagingBuffer;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.shm.ShmCommunicator;
import org.sparkccl.core.transport.LocalMemoryTransport;

class WarmUpTest {
    private static final long MS = TimeUnit.MILLISECONDS.toNanos(1);
    private static final long HOUR = TimeUnit.HOURS.toNanos(1);

    /** A round of {@link WarmUp#ROUND} calls of {@code ns} each. */
    private static long[] round(long ns) {
        long[] calls = new long[WarmUp.ROUND];
        Arrays.fill(calls, ns);
        return calls;
    }

    @Test
    void aSteadyMedianBeforeTheC2ThresholdIsC1sCodeAndDoesNotStopTheWarmUp() {
        WarmUp.Verdict verdict = new WarmUp.Verdict(10_000, 1_000_000, HOUR);
        verdict.start(0);
        long now = 0;
        for (int calls = WarmUp.ROUND; calls < 10_000; calls += WarmUp.ROUND) {
            now += 10 * MS;
            assertTrue(verdict.goOn(round(3_000), WarmUp.ROUND, calls, now), "stopped at " + calls + " calls");
        }
    }

    @Test
    void stopsOncePastTheThresholdTheMedianHasStoppedImprovingForRoundsAndMilliseconds() {
        WarmUp.Verdict verdict = new WarmUp.Verdict(1_000, 1_000_000, HOUR);
        verdict.start(0);
        assertTrue(verdict.goOn(round(3_000), WarmUp.ROUND, 1_024, MS));
        // C2's code arrives: faster, so the count of steady rounds starts again.
        assertTrue(verdict.goOn(round(600), WarmUp.ROUND, 1_280, 2 * MS));
        for (int i = 1; i <= WarmUp.Verdict.STEADY_ROUNDS; i++) {
            assertTrue(verdict.goOn(round(580), WarmUp.ROUND, 1_280 + i * WarmUp.ROUND, 2 * MS + i * 1_000),
                    "steady rounds, but not yet for " + WarmUp.Verdict.STEADY_NS + " ns");
        }
        assertFalse(verdict.goOn(round(590), WarmUp.ROUND, 3_000, 2 * MS + WarmUp.Verdict.STEADY_NS));
        assertTrue(verdict.describe().startsWith("calls steady"), verdict.describe());
    }

    @Test
    void stopsWhenTheBudgetIsSpentOrAWholeRoundWouldPassTheMaximum() {
        WarmUp.Verdict late = new WarmUp.Verdict(100_000, 1_000_000, 50 * MS);
        late.start(0);
        assertTrue(late.goOn(round(3_000), WarmUp.ROUND, WarmUp.ROUND, 49 * MS));
        assertFalse(late.goOn(round(2_000), WarmUp.ROUND, 2 * WarmUp.ROUND, 50 * MS));
        assertTrue(late.describe().startsWith("time budget spent"), late.describe());

        WarmUp.Verdict many = new WarmUp.Verdict(100_000, 3 * WarmUp.ROUND, HOUR);
        many.start(0);
        assertTrue(many.goOn(round(3_000), WarmUp.ROUND, WarmUp.ROUND, MS));
        assertFalse(many.goOn(round(2_000), WarmUp.ROUND, 2 * WarmUp.ROUND + 1, 2 * MS));
    }

    @Test
    void everyRankMakesAsManyCallsAsTheRankThatWantsTheMost() throws Exception {
        int n = 3;
        int[] calls = new int[n];
        Params params = Params.defaults().withOverrides(Map.of("SPARKCCL_WARMUP_CALLS", "0"));
        new ThreadGroupBootstrap.Group(n, Duration.ofSeconds(60)).run(bootstrap -> {
            try (Communicator comm = ShmCommunicator.create(bootstrap, List.of(new LocalMemoryTransport()), params)) {
                // Rank 1 wants the calls past a threshold of 2000; the others would stop after 3 rounds.
                WarmUp.Verdict verdict = new WarmUp.Verdict(comm.rank() == 1 ? 2_000 : 0, 100_000, HOUR);
                calls[comm.rank()] = WarmUp.run(comm, 100_000, verdict);
            }
            return null;
        }, Duration.ofSeconds(120));
        assertTrue(calls[1] >= 2_000, "rank 1 made " + calls[1]);
        for (int r = 0; r < n; r++) {
            assertEquals(calls[1], calls[r], "rank " + r);
        }
        assertEquals(0, HostStagingBuffer.outstandingBytes());
    }

    @Test
    void makesExactlyTheMaximumWhenItIsLessThanARound() throws Exception {
        int[] calls = new int[2];
        Params params = Params.defaults().withOverrides(Map.of("SPARKCCL_WARMUP_CALLS", "0"));
        new ThreadGroupBootstrap.Group(2, Duration.ofSeconds(60)).run(bootstrap -> {
            try (Communicator comm = ShmCommunicator.create(bootstrap, List.of(new LocalMemoryTransport()), params)) {
                calls[comm.rank()] = WarmUp.run(comm, 10, new WarmUp.Verdict(0, 10, HOUR));
            }
            return null;
        }, Duration.ofSeconds(120));
        assertEquals(10, calls[0]);
        assertEquals(10, calls[1]);
    }
}
