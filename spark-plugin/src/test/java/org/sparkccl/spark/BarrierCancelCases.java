package org.sparkccl.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.sparkccl.spark.LocalExecutors.read;
import static org.sparkccl.spark.LocalExecutors.write;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.apache.spark.BarrierTaskContext;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import org.apache.spark.sql.SparkSession;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.PeerFailedException;
import org.sparkccl.core.ReduceOp;

/**
 * The driver stopping a barrier stage whose ranks wait in a collective, on whatever engine the
 * cluster gives the ranks (BarrierCancelTest: host memory; SparkGpuCancelTest: GPUs): cancelling the
 * job group, and killing one task with {@code killTaskAttempt} (speculation off), a task waiting in
 * the all-reduce or the one outside it. Rank 0 stays out of the all-reduce (it runs user code that
 * watches Spark's kill flag), so the other ranks sit in it until the driver acts. Every task must end
 * within 5 s, the peers of a killed task must fail within 2 s naming it; then the next stage on the
 * same executors all-reduces right. Times are printed on lines that start with {@code CANCEL}.
 */
final class BarrierCancelCases {
    /** The rank that stays out of the all-reduce until Spark kills its task. */
    static final int HOLDOUT = 0;
    /** How long the waiting ranks sit in the all-reduce before the driver acts: well into parking. */
    private static final long WAIT_BEFORE_ACTING_MS = 1_000;
    private static final long FREED_WITHIN_MS = 5_000;
    private static final long PEERS_FAIL_WITHIN_MS = 2_000;
    private static final long TIMEOUT_S = 120;

    private final SparkSession spark;
    private final JavaSparkContext jsc;
    private final int ranks;
    private final int count;
    private final String engine;
    private final TaskEnds taskEnds = new TaskEnds();

    /**
     * {@code ranks} ranks, one per task; {@code count} floats per rank, above the one-shot threshold so
     * that the waiting ranks wait in the ring; {@code engine} names the engine on the printed lines.
     */
    BarrierCancelCases(SparkSession spark, int ranks, int count, String engine) {
        this.spark = spark;
        this.jsc = JavaSparkContext.fromSparkContext(spark.sparkContext());
        this.ranks = ranks;
        this.count = count;
        this.engine = engine;
        spark.sparkContext().addSparkListener(taskEnds);
    }

    /** The ranks 0..n-1, one per partition. */
    JavaRDD<Integer> ranks() {
        return jsc.parallelize(IntStream.range(0, ranks).boxed().collect(Collectors.toList()), ranks);
    }

    /** {@code cancelJobGroup} (Spark's default: tasks marked killed, threads not interrupted) frees every task. */
    void cancellingTheJobGroupFreesEveryTask(Path dir) throws Exception {
        String d = dir.toString();
        String group = "sparkccl-cancel-test";
        int n = count;
        CompletableFuture<List<String>> job = CompletableFuture.supplyAsync(() -> {
            jsc.setJobGroup(group, "barrier stage cancelled while it waits in an all-reduce", false);
            try {
                return SparkCclJobs.barrierMapPartitions(ranks(), part -> waitInAllReduce(d, 1, n)).collect();
            } finally {
                jsc.clearJobGroup();
            }
        });
        List<Long> tasks = awaitAllWaiting(dir, job);
        Thread.sleep(WAIT_BEFORE_ACTING_MS);

        long cancelledAtMs = System.currentTimeMillis(); // compared with the ranks' clocks: same host
        long cancelled = System.nanoTime();
        jsc.cancelJobGroup(group);
        ExecutionException failed = assertThrows(ExecutionException.class, () -> job.get(TIMEOUT_S, TimeUnit.SECONDS));
        assertTrue(String.valueOf(failed.getCause().getMessage()).contains("cancel"), String.valueOf(failed.getCause()));
        long freedMs = taskEnds.await(tasks, cancelled);
        System.out.println("CANCEL " + engine + " cancelJobGroup: every task of the stage ended " + freedMs
                + " ms after the cancel");
        assertTrue(freedMs < FREED_WITHIN_MS, "the tasks ended " + freedMs + " ms after the cancel");

        for (int r = 0; r < ranks; r++) {
            if (r == HOLDOUT) {
                continue;
            }
            // Cancelled itself, or saw the holdout's task killed by the cancel first: either way it says so.
            RankError e = RankError.of(dir, r);
            System.out.println("CANCEL " + engine + " rank " + r + " failed " + (e.atMs - cancelledAtMs)
                    + " ms after the cancel with: " + e.message);
            assertTrue(e.message.contains("cancelled"), "rank " + r + ": " + e.message);
        }
    }

    /** Rank {@code victim}'s task, killed while it waits in the all-reduce, is named by its peers there. */
    void aTaskKilledInTheAllReduceIsNamedByItsPeers(Path dir, int victim) throws Exception {
        Map<Integer, RankError> errors = killOneWhileTheOthersWait(dir, victim, "rank " + victim + " aborted");
        System.out.println("CANCEL " + engine + " rank " + victim + " (killed) failed with: " + errors.get(victim).message);
        // Spark marks the task killed, then interrupts its thread: a wait may see either first.
        String own = errors.get(victim).message;
        assertTrue(own.contains("interrupted") || own.contains("cancelled (task killed)"), own);
    }

    /** The holdout's task, killed outside the all-reduce, is named with Spark's reason by every peer. */
    void aTaskKilledOutsideTheAllReduceIsNamedByItsPeers(Path dir) throws Exception {
        // Not in a collective, so no wait of its own ends with an error: its task's failure says it.
        killOneWhileTheOthersWait(dir, HOLDOUT, "rank " + HOLDOUT + " aborted");
        String told = "rank " + HOLDOUT + ": its Spark task was killed (the test kills rank " + HOLDOUT
                + ") between collectives";
        for (int r = 1; r < ranks; r++) {
            assertTrue(RankError.of(dir, r).message.contains(told), RankError.of(dir, r).message);
        }
    }

    /** A barrier stage on the same executors: its all-reduce of random floats matches the float64 reference. */
    void theNextStageAllReducesRight(long seed) {
        int n = count;
        List<Double> maxErrors = SparkCclJobs.barrierMapPartitions(ranks(), part -> Collections.singletonList(
                SparkTestSupport.allReduceMaxError(SparkCcl.communicator(), seed, n)).iterator()).collect();
        assertEquals(ranks, maxErrors.size());
        for (int r = 0; r < ranks; r++) {
            assertTrue(maxErrors.get(r) < 1e-5, "rank " + r + ": max error " + maxErrors.get(r));
        }
        System.out.println("CANCEL " + engine + " next stage: " + ranks + " ranks x " + count
                + " floats match the float64 reference, largest error " + Collections.max(maxErrors));
    }

    /**
     * Kills rank {@code victim}'s task ({@code killTaskAttempt}, interrupting its thread) while the
     * other ranks wait in the all-reduce and the holdout outside it; every rank that waited in the
     * all-reduce and was not killed must fail within {@link #PEERS_FAIL_WITHIN_MS}, naming the victim,
     * with {@code because} in its message; every task must end within {@link #FREED_WITHIN_MS}. Returns
     * the errors the ranks in the all-reduce wrote down, by rank.
     */
    private Map<Integer, RankError> killOneWhileTheOthersWait(Path dir, int victim, String because) throws Exception {
        String d = dir.toString();
        int n = count;
        CompletableFuture<List<String>> job = CompletableFuture.supplyAsync(() -> SparkCclJobs
                .barrierMapPartitions(ranks(), part -> waitInAllReduce(d, 2, n)).collect());
        List<Long> tasks = awaitAllWaiting(dir, job);
        Thread.sleep(WAIT_BEFORE_ACTING_MS);

        long killedAtMs = System.currentTimeMillis(); // compared with the ranks' clocks: same host
        long killed = System.nanoTime();
        assertTrue(spark.sparkContext().killTaskAttempt(tasks.get(victim), true, "the test kills rank " + victim),
                "Spark did not find task " + tasks.get(victim));
        ExecutionException failed = assertThrows(ExecutionException.class, () -> job.get(TIMEOUT_S, TimeUnit.SECONDS));
        System.out.println("CANCEL " + engine + " the job failed with: " + failed.getCause().getMessage());
        long freedMs = taskEnds.await(tasks, killed);
        System.out.println("CANCEL " + engine + " killTaskAttempt of rank " + victim + ": every task of the stage ended "
                + freedMs + " ms after the kill");
        assertTrue(freedMs < FREED_WITHIN_MS, "the tasks ended " + freedMs + " ms after the kill");

        Map<Integer, RankError> errors = new TreeMap<>();
        for (int r = 0; r < ranks; r++) {
            if (r == HOLDOUT) {
                continue;
            }
            RankError e = RankError.of(dir, r);
            errors.put(r, e);
            if (r == victim) {
                continue;
            }
            long afterMs = e.atMs - killedAtMs;
            System.out.println("CANCEL " + engine + " rank " + r + " failed " + afterMs + " ms after the kill of rank "
                    + victim + " with: " + e.message);
            assertEquals(victim, e.failedRank, "rank " + r + " names rank " + e.failedRank + ": " + e.message);
            assertTrue(e.message.contains(because), e.message);
            assertTrue(afterMs < PEERS_FAIL_WITHIN_MS, "rank " + r + " failed " + afterMs + " ms after the kill");
        }
        return errors;
    }

    /**
     * Every rank builds the communicator and writes its task id; the holdout then waits, outside the
     * collective, until Spark marks its task killed; the others enter an all-reduce of {@code count}
     * floats that cannot end without it and write down the error they end with.
     */
    private static Iterator<String> waitInAllReduce(String dir, long seed, int count) throws Exception {
        BarrierTaskContext context = BarrierTaskContext.get();
        int rank = context.partitionId();
        Communicator comm = SparkCcl.communicator();
        write(Paths.get(dir, "task-" + rank), Long.toString(context.taskAttemptId()));
        if (rank == HOLDOUT) {
            while (!context.isInterrupted()) {
                Thread.sleep(5);
            }
            throw new IllegalStateException("rank " + rank + " stops: its task was killed");
        }
        float[] data = SparkTestSupport.randomFloats(seed, rank, count);
        try {
            comm.allReduce(data, ReduceOp.SUM);
        } catch (RuntimeException e) {
            int failedRank = e instanceof PeerFailedException ? ((PeerFailedException) e).failedRank() : -1;
            write(Paths.get(dir, "error-" + rank), System.currentTimeMillis() + "\n" + failedRank + "\n" + e.getMessage());
            throw e;
        }
        throw new IllegalStateException("rank " + rank + ": the all-reduce ended although rank " + HOLDOUT
                + " never joined it");
    }

    /** The error a rank wrote down: when (wall clock, ms), the rank it names (-1: none) and the message. */
    private static final class RankError {
        final long atMs;
        final int failedRank;
        final String message;

        private RankError(long atMs, int failedRank, String message) {
            this.atMs = atMs;
            this.failedRank = failedRank;
            this.message = message;
        }

        static RankError of(Path dir, int rank) {
            Path file = dir.resolve("error-" + rank);
            assertTrue(Files.exists(file), "rank " + rank + " recorded no error");
            String[] parts = read(file).split("\n", 3);
            return new RankError(Long.parseLong(parts[0]), Integer.parseInt(parts[1]), parts[2]);
        }
    }

    /** The task ids of every rank, once each has written its id (the waiting ranks are then in the all-reduce). */
    private List<Long> awaitAllWaiting(Path dir, CompletableFuture<?> job) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(TIMEOUT_S);
        while (IntStream.range(0, ranks).anyMatch(r -> !Files.exists(dir.resolve("task-" + r)))) {
            if (job.isDone()) {
                job.get(); // throws what ended it
            }
            assertTrue(System.nanoTime() < deadline, "the ranks did not all reach the all-reduce");
            Thread.sleep(20);
        }
        List<Long> tasks = new ArrayList<>();
        for (int r = 0; r < ranks; r++) {
            tasks.add(Long.parseLong(read(dir.resolve("task-" + r)).trim()));
        }
        return tasks;
    }

    /** When the driver learnt that each task ended (Spark's listener bus), by task id. */
    private static final class TaskEnds extends SparkListener {
        private final Map<Long, Long> endedAtNs = new ConcurrentHashMap<>();

        @Override
        public void onTaskEnd(SparkListenerTaskEnd end) {
            endedAtNs.put(end.taskInfo().taskId(), System.nanoTime());
        }

        /** Waits until every one of {@code tasks} ended; returns the last end's ms after {@code sinceNs}. */
        long await(List<Long> tasks, long sinceNs) throws InterruptedException {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(TIMEOUT_S);
            while (!endedAtNs.keySet().containsAll(tasks)) {
                assertTrue(System.nanoTime() < deadline, "tasks " + tasks + " did not all end; ended: " + endedAtNs.keySet());
                Thread.sleep(10);
            }
            long last = tasks.stream().mapToLong(endedAtNs::get).max().getAsLong();
            return TimeUnit.NANOSECONDS.toMillis(last - sinceNs);
        }
    }
}
