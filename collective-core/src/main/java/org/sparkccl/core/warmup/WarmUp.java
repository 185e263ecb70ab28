package org.sparkccl.core.warmup;

import java.lang.management.ManagementFactory;
import java.util.Arrays;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.agrona.UnsafeApi;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.DataType;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.jdk.JdkAccess;
import org.sparkccl.core.log.CclLog;
import org.sparkccl.core.log.Subsys;
import org.sparkccl.core.memory.HostStagingBuffer;
import org.sparkccl.core.param.Params;

/**
 * The all-reduces a host communicator makes when it is built, every rank together, on scratch
 * memory: a fresh JVM's first calls otherwise load the collective's classes and run interpreted,
 * then in C1's profiling code (tier 3), which cost a job's first 1 KB calls milliseconds, then 4-10x
 * the steady state, until C2 has compiled the small path thousands of calls later (allreduce-perf
 * --first-calls; docs/perf/cpu-allreduce-notes.md).
 *
 * <p>The calls go round the sizes a job's small calls take, in and out of place: 4 B and 64 B (below
 * the reductions' heap blocks), 1 KB and 8 KB (through them, {@code reduce.HeapBlocks}). So every
 * branch of the small path has run before the job's first call, and no compiled method meets one it
 * never took (a deoptimization). Large calls are not warmed: their loops run long enough in one call
 * to be compiled inside it.
 *
 * <p>How many: rounds of {@link #ROUND} calls until the calls are past the JVM's own threshold for C2
 * ({@link #c2Calls}, less the calls earlier warm-ups of this JVM made) and the round's median call
 * has stopped getting faster ({@link Verdict}: C2's code is installed); at most
 * {@code SPARKCCL_WARMUP_CALLS} calls, and no round starts after {@code SPARKCCL_WARMUP_MS}. After
 * each round every rank says whether it wants another in one more all-reduce (its 1 or 0, summed):
 * all go on while any wants to, so every rank makes the same calls whatever its own clock and its
 * own JVM say.
 */
public final class WarmUp {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    /** Elements per call, float32: 4 B, 64 B, 1 KB, 8 KB. */
    private static final long[] COUNTS = {1, 16, 256, 2048};
    /** An input and an output of the largest call. */
    private static final long DATA_BYTES = 2 * COUNTS[COUNTS.length - 1] * Float.BYTES;
    /** The data, then one rank's wish to go on and the sum of every rank's (see {@link #run(Communicator, int, Verdict)}). */
    private static final long SCRATCH_BYTES = DATA_BYTES + 2 * Float.BYTES;
    /** Calls per round (a multiple of the 8-call cycle of sizes and places), before each verdict. */
    static final int ROUND = 256;
    /** Used where the JVM does not say its thresholds: HotSpot 17's tiered 200 + 5000 invocations. */
    private static final long DEFAULT_C2_CALLS = 5200;
    /** Warm-up calls this JVM has made, all communicators together. */
    private static final AtomicLong CALLS_MADE = new AtomicLong();

    /** The communicator classes whose warm-up has run to the end in this JVM: their small path is compiled. */
    private static final Set<Class<?>> WARMED = ConcurrentHashMap.newKeySet();

    private WarmUp() {
    }

    /**
     * Whether a communicator of {@code engine}'s class has run its warm-up in this JVM: the JIT's code
     * belongs to the JVM, so a later communicator there (a later fit, the next stage) gains nothing
     * from another one. Engines tell it in their bootstrap round and skip the warm-up only where every
     * rank says so, so that the ranks still make the same calls.
     */
    public static boolean doneInThisJvm(Class<? extends Communicator> engine) {
        return WARMED.contains(engine);
    }

    /**
     * Warms {@code comm} up as {@code params} say ({@code WARMUP_CALLS}, {@code WARMUP_MS}) and logs
     * what it did. Collective: every rank, with the same settings.
     */
    public static void run(Communicator comm, Params params, CclLog log) {
        int maxCalls = params.get(Params.WARMUP_CALLS);
        if (maxCalls <= 0 || comm.size() == 1) {
            return;
        }
        long t0 = System.nanoTime();
        // This JVM's earlier warm-ups count: a second communicator (a retried stage) runs compiled code already.
        long c2Calls = Math.max(0, JvmThreshold.C2_CALLS - CALLS_MADE.get());
        Verdict verdict = new Verdict(c2Calls, maxCalls, TimeUnit.MILLISECONDS.toNanos(params.get(Params.WARMUP_MS)));
        int calls = run(comm, maxCalls, verdict);
        CALLS_MADE.addAndGet(calls);
        WARMED.add(comm.getClass()); // it ran to its end (an exception skips this)
        if (calls > 0 && log.infoEnabled(Subsys.INIT)) {
            log.info(Subsys.INIT, "warm-up: %d all-reduces in %.1f ms (C2 from ~%d calls here; %s)", calls,
                    (System.nanoTime() - t0) / 1e6, c2Calls, verdict.describe());
        }
    }

    /**
     * Makes up to {@code maxCalls} all-reduces on {@code comm}, in rounds, until no rank's
     * {@code verdict} wants another; returns how many. Collective: every rank with the same
     * {@code maxCalls}.
     */
    static int run(Communicator comm, int maxCalls, Verdict verdict) {
        if (maxCalls <= 0 || comm.size() == 1) {
            return 0;
        }
        long[] callNs = new long[ROUND];
        int calls = 0;
        try (HostStagingBuffer scratch = new HostStagingBuffer(SCRATCH_BYTES)) {
            long send = scratch.address();
            long wishIn = send + DATA_BYTES;
            long wishes = wishIn + Float.BYTES;
            UnsafeApi.setMemory(send, SCRATCH_BYTES, (byte) 0);
            verdict.start(System.nanoTime());
            while (true) {
                int n = Math.min(ROUND, maxCalls - calls);
                for (int i = 0; i < n; i++) {
                    long count = COUNTS[(i >> 1) % COUNTS.length];
                    long recv = i % 2 == 0 ? send : send + DATA_BYTES / 2;
                    long t = System.nanoTime();
                    comm.allReduce(send, recv, count, DataType.FLOAT32, ReduceOp.SUM);
                    callNs[i] = System.nanoTime() - t;
                }
                calls += n;
                if (calls >= maxCalls) {
                    return calls; // every rank knows this without being told
                }
                // Each rank's own wish, summed: the ranks go on together while any of them wants to.
                UnsafeApi.putFloat(wishIn, verdict.goOn(callNs, n, calls, System.nanoTime()) ? 1f : 0f);
                comm.allReduce(wishIn, wishes, 1, DataType.FLOAT32, ReduceOp.SUM);
                calls++;
                if (UnsafeApi.getFloat(wishes) < 0.5f) {
                    return calls;
                }
            }
        }
    }

    /** Read once per JVM, at the first warm-up (loading the management beans costs ~10 ms). */
    private static final class JvmThreshold {
        static final long C2_CALLS = c2Calls();
    }

    /**
     * Calls after which HotSpot has asked C2 for a method called once per call: tiered, C1's
     * profiling tier from {@code Tier3InvocationThreshold} calls and C2 after
     * {@code Tier4InvocationThreshold} more; C2 alone ({@code -XX:-TieredCompilation}),
     * {@code CompileThreshold}; each times {@code CompileThresholdScaling}.
     */
    static long c2Calls() {
        try {
            com.sun.management.HotSpotDiagnosticMXBean vm =
                    ManagementFactory.getPlatformMXBean(com.sun.management.HotSpotDiagnosticMXBean.class);
            double scale = Double.parseDouble(vm.getVMOption("CompileThresholdScaling").getValue());
            long calls = Boolean.parseBoolean(vm.getVMOption("TieredCompilation").getValue())
                    ? Long.parseLong(vm.getVMOption("Tier3InvocationThreshold").getValue())
                            + Long.parseLong(vm.getVMOption("Tier4InvocationThreshold").getValue())
                    : Long.parseLong(vm.getVMOption("CompileThreshold").getValue());
            return Math.max(0, Math.round(calls * scale));
        } catch (RuntimeException | LinkageError e) {
            return DEFAULT_C2_CALLS; // not HotSpot, or no jdk.management
        }
    }

    /**
     * One rank's stop rule: go on until past {@code c2Calls} and, from there, the round median has not
     * improved on the best before it by more than {@link #IMPROVES} for {@link #STEADY_ROUNDS} rounds
     * and {@link #STEADY_NS} in a row; stop anyway once the budget is spent (checked after each round)
     * or a whole round would pass the maximum. Not thread safe.
     */
    static final class Verdict {
        /** A round median below this fraction of the best before it counts as still getting faster. */
        static final double IMPROVES = 0.9;
        static final int STEADY_ROUNDS = 3;
        /** ... and for this long: C2 compiles a method in milliseconds, on a compiler thread beside the calls. */
        static final long STEADY_NS = TimeUnit.MILLISECONDS.toNanos(5);
        final long c2Calls;
        private final int maxCalls;
        private final long budgetNs;
        private long startNs;
        private long best = Long.MAX_VALUE;
        private int steadyRounds;
        private long steadySinceNs;
        private String reason = "";
        private long firstMedian = -1;
        private long lastMedian;

        Verdict(long c2Calls, int maxCalls, long budgetNs) {
            this.c2Calls = c2Calls;
            this.maxCalls = maxCalls;
            this.budgetNs = budgetNs;
        }

        void start(long nowNs) {
            startNs = nowNs;
        }

        /** After a round whose {@code n} call times are {@code callNs}, {@code calls} calls in all. */
        boolean goOn(long[] callNs, int n, int calls, long nowNs) {
            long[] sorted = Arrays.copyOf(callNs, n);
            Arrays.sort(sorted);
            long median = sorted[n / 2];
            if (firstMedian < 0) {
                firstMedian = median;
            }
            lastMedian = median;
            if (calls < c2Calls || median < best * IMPROVES) {
                steadyRounds = 0; // before C2's threshold a steady median is C1's code's
                steadySinceNs = nowNs;
            } else {
                steadyRounds++;
            }
            best = Math.min(best, median);
            if (nowNs - startNs >= budgetNs) {
                reason = "time budget spent";
                return false;
            }
            if (calls + ROUND + 1 > maxCalls) {
                reason = "calls at the maximum";
                return false;
            }
            if (steadyRounds >= STEADY_ROUNDS && nowNs - steadySinceNs >= STEADY_NS) {
                reason = "calls steady";
                return false;
            }
            return true;
        }

        String describe() {
            if (firstMedian < 0) {
                return "calls at the maximum"; // no round ended in a verdict
            }
            return (reason.isEmpty() ? "calls at the maximum" : reason) + String.format(java.util.Locale.ROOT,
                    ", median call %.2f us in the first round, %.2f us in the last", firstMedian / 1e3, lastMedian / 1e3);
        }
    }
}
