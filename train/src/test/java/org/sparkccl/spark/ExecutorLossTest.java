package org.sparkccl.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.sparkccl.spark.LocalExecutors.list;
import static org.sparkccl.spark.LocalExecutors.read;
import static org.sparkccl.spark.LocalExecutors.write;

import java.io.Serializable;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.apache.spark.BarrierTaskContext;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.io.TempDir;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.PeerFailedException;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.train.ModelSpec;
import org.sparkccl.train.OptimizerSpec;
import org.sparkccl.train.PreparedData;
import org.sparkccl.train.TrainConfig;
import org.sparkccl.train.TrainingData;

/**
 * An executor JVM SIGKILLed in the middle of a barrier stage, on a local cluster of 2 executors x 2
 * fake GPUs (4 ranks, 2 per executor). A retryable stage ({@link SparkCclJobs#retryableBarrierMapPartitions},
 * a ShuffleMapStage) is run again by Spark once the worker has started a new executor, and finishes
 * with the right sums; a barrier result stage fails the job. Either way the surviving ranks' errors
 * name the dead rank and say what Spark does next. The tests run in order: each kill costs an
 * executor restart (10-20 s here), and each test first waits for both executors.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class ExecutorLossTest {
    private static final int EXECUTORS = 2;
    private static final int GPUS_PER_EXECUTOR = 2;
    private static final int RANKS = EXECUTORS * GPUS_PER_EXECUTOR;
    /** The rank that waits outside the collective until the test kills its executor. */
    private static final int VICTIM = 0;
    private static final long TIMEOUT_S = 240;
    private static SparkSession spark;
    private static JavaSparkContext jsc;

    @BeforeAll
    static void start() throws InterruptedException {
        spark = SparkSession.builder().config(SparkTestSupport.localClusterConf(EXECUTORS, 2, GPUS_PER_EXECUTOR,
                "sparkccl-executor-loss").set("spark.sparkccl.timeoutMs", "120000")).getOrCreate();
        jsc = JavaSparkContext.fromSparkContext(spark.sparkContext());
        SparkTestSupport.awaitExecutors(spark.sparkContext(), EXECUTORS);
    }

    @AfterAll
    static void stop() {
        if (spark != null) {
            spark.stop();
        }
    }

    @BeforeEach
    void bothExecutorsUp() throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(180);
        while (executorProcesses().size() != EXECUTORS
                || spark.sparkContext().statusTracker().getExecutorInfos().length != EXECUTORS + 1) {
            assertTrue(System.nanoTime() < deadline, "the workers did not bring back " + EXECUTORS + " executors");
            Thread.sleep(200);
        }
    }

    /** What a rank of the retried attempt computed. */
    static final class RankSum implements Serializable {
        final int rank;
        final int attempt;
        final double maxError;
        final double sumOfMagnitudes;

        RankSum(int rank, int attempt, double maxError, double sumOfMagnitudes) {
            this.rank = rank;
            this.attempt = attempt;
            this.maxError = maxError;
            this.sumOfMagnitudes = sumOfMagnitudes;
        }
    }

    @Test
    @Order(1)
    void aRetryableStageIsRunAgainAndFinishesWithTheRightSums(@TempDir Path dir) throws Exception {
        int count = 65_537;
        long seed = 41;
        String d = dir.toString();
        CompletableFuture<List<RankSum>> job = CompletableFuture.supplyAsync(() -> SparkCclJobs
                .retryableBarrierMapPartitions(ranks(), part -> allReduceOrWaitToBeKilled(d, seed, count)).collect());

        KilledExecutor killed = killVictimWhenAllWait(dir, job);
        List<RankSum> sums = job.get(TIMEOUT_S, TimeUnit.SECONDS);

        assertEquals(RANKS, sums.size());
        for (int r = 0; r < RANKS; r++) {
            RankSum s = sums.get(r);
            assertEquals(r, s.rank, "partition r holds rank r's output");
            assertTrue(s.attempt >= 1, "rank " + r + " finished in attempt " + s.attempt);
            assertTrue(s.maxError < 1e-5, "rank " + r + ": max error " + s.maxError + " against the float64 reference");
            assertTrue(s.sumOfMagnitudes > 0.1 * count, "rank " + r + ": the sums are not zeros");
        }
        killed.checkSurvivorErrors(dir, "Spark retries this barrier stage (attempt 1 of 4, spark.stage.maxConsecutiveAttempts)");

        // Nothing of the failed attempt is left: no communicator open, nothing mapped, nothing in /dev/shm.
        ExecutorState.assertNothingHeld(ranks());
        Set<Long> pids = killed.pidsSeen(dir);
        assertEquals(List.of(), ExecutorState.shmSegmentsOf(pids), "segments of the job's processes " + pids
                + " in /dev/shm");
    }

    @Test
    @Order(2)
    void aBarrierResultStageFailsTheJobAndTheRanksSaySo(@TempDir Path dir) throws Exception {
        int count = 65_537;
        long seed = 43;
        String d = dir.toString();
        CompletableFuture<List<RankSum>> job = CompletableFuture.supplyAsync(() -> SparkCclJobs
                .barrierMapPartitions(ranks(), part -> allReduceOrWaitToBeKilled(d, seed, count)).collect());

        KilledExecutor killed = killVictimWhenAllWait(dir, job);
        ExecutionException failed = assertThrows(ExecutionException.class, () -> job.get(TIMEOUT_S, TimeUnit.SECONDS));
        String jobError = String.valueOf(failed.getCause().getMessage());
        assertTrue(jobError.contains("Could not recover from a failed barrier ResultStage"), jobError);
        System.out.println("the job failed with: " + jobError);
        killed.checkSurvivorErrors(dir, "this barrier stage is a result stage, which Spark does not retry: the job"
                + " fails; use SparkCclJobs.retryableBarrierMapPartitions");
        assertFalse(Files.exists(dir.resolve("pid-" + VICTIM + "-1")), "a result stage ran a second attempt");
    }

    /**
     * TrainJob with checkpoints every 20 steps, an executor killed after the first checkpoint: Spark
     * retries the stage, the new attempt resumes from the newest checkpoint (step N), and the final
     * weights equal, bit for bit, those of an uninterrupted run resumed from a copy of that checkpoint:
     * both start from the same bytes and run the same steps, and every step is computed in the same
     * order whatever executor a rank runs in (rank r holds the examples with id = r mod 4, and the
     * all-reduce adds the ranks up in the same order), so not even float rounding differs.
     */
    @Test
    @Order(3)
    void trainJobResumesARetriedAttemptFromItsNewestCheckpoint(@TempDir Path dir) throws Exception {
        long steps = 400;
        long every = 20;
        Path checkpoints = dir.resolve("checkpoints");
        Path copies = dir.resolve("copies");
        Files.createDirectories(checkpoints);
        PreparedData data = PreparedData.of(TrainingData.digits(spark), null, null, RANKS);
        ModelSpec model = new ModelSpec(ModelSpec.Kind.MLP, data.stats().cols(), 16, data.stats().classes());
        OptimizerSpec adam = new OptimizerSpec(OptimizerSpec.Kind.ADAM, 0.01, 0.9);
        TrainConfig config = new TrainConfig(model, adam, 96, steps, 5, 100, checkpoints.toUri().toString(), every,
                false, Map.of());

        long victim = executorProcesses().get(0);
        KilledTraining killed = KilledTraining.trainKillingOne(data, config, checkpoints, copies, victim);
        killed.assertResumedExactly(spark.sparkContext(), data, config, copies);
        data.release();
    }

    /** The ranks 0..3, one per partition. */
    private static JavaRDD<Integer> ranks() {
        return jsc.parallelize(IntStream.range(0, RANKS).boxed().collect(Collectors.toList()), RANKS);
    }

    /**
     * In attempt 0 every rank records its pid, builds the communicator and enters an all-reduce but
     * the victim, which waits to be killed; the others record the error they end with. In a later
     * attempt every rank all-reduces and checks the sums against a float64 reference.
     */
    private static java.util.Iterator<RankSum> allReduceOrWaitToBeKilled(String dir, long seed, int count)
            throws Exception {
        BarrierTaskContext context = BarrierTaskContext.get();
        int attempt = context.stageAttemptNumber();
        int rank = context.partitionId();
        write(Paths.get(dir, "pid-" + rank + "-" + attempt), Long.toString(ProcessHandle.current().pid()));
        Communicator comm = SparkCcl.communicator();
        float[] data = SparkTestSupport.randomFloats(seed, rank, count);
        if (attempt == 0) {
            write(Paths.get(dir, "waiting-" + rank), "");
            if (rank == VICTIM) {
                Thread.sleep(TimeUnit.SECONDS.toMillis(TIMEOUT_S));
                throw new IllegalStateException("rank " + rank + " was not killed");
            }
            try {
                comm.allReduce(data, ReduceOp.SUM);
            } catch (PeerFailedException e) {
                write(Paths.get(dir, "error-" + rank), e.failedRank() + "\n" + e.getMessage());
                throw e;
            } catch (RuntimeException e) {
                write(Paths.get(dir, "error-" + rank), "-1\n" + e);
                throw e;
            }
            throw new IllegalStateException("rank " + rank + ": the all-reduce ended although rank " + VICTIM
                    + " never joined it");
        }
        comm.allReduce(data, ReduceOp.SUM);
        double[] reference = SparkTestSupport.referenceSum(seed, comm.size(), count);
        double maxError = 0;
        double magnitudes = 0;
        for (int i = 0; i < count; i++) {
            maxError = Math.max(maxError, Math.abs(data[i] - reference[i]));
            magnitudes += Math.abs(data[i]);
        }
        return Collections.singletonList(new RankSum(rank, attempt, maxError, magnitudes)).iterator();
    }

    /** The executor killed in attempt 0 and the ranks that died with it. */
    private static final class KilledExecutor {
        final long pid;
        final Set<Integer> deadRanks;

        KilledExecutor(long pid, Set<Integer> deadRanks) {
            this.pid = pid;
            this.deadRanks = deadRanks;
        }

        List<Integer> survivors() {
            return IntStream.range(0, RANKS).filter(r -> !deadRanks.contains(r)).boxed().collect(Collectors.toList());
        }

        /**
         * Each surviving rank of attempt 0 failed with a PeerFailedException that names a dead rank and
         * its pid and ends with {@code consequence}, even where Spark's kill of the stage's remaining
         * tasks reached it first (Spark learns of the lost executor about as fast as a waiting rank
         * does; a cancelled wait names a dead peer before the kill).
         */
        void checkSurvivorErrors(Path dir, String consequence) throws InterruptedException {
            for (int survivor : survivors()) {
                Path file = dir.resolve("error-" + survivor);
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
                while (!Files.exists(file)) {
                    assertTrue(System.nanoTime() < deadline, "rank " + survivor + " recorded no error");
                    Thread.sleep(50);
                }
                String[] error = read(file).split("\n", 2);
                int named = Integer.parseInt(error[0]);
                System.out.println("rank " + survivor + " failed with: " + error[1]);
                assertTrue(deadRanks.contains(named), "rank " + survivor + " names rank " + named + ", not one of the"
                        + " dead ranks " + deadRanks + ": " + error[1]);
                assertTrue(error[1].contains("rank " + named + " (pid " + pid + ") died"), error[1]);
                assertTrue(error[1].contains(consequence), error[1]);
            }
        }

        /** Every pid a rank ran in, over all attempts. */
        Set<Long> pidsSeen(Path dir) {
            return list(dir).stream().filter(p -> p.getFileName().toString().startsWith("pid-"))
                    .map(p -> Long.parseLong(read(p).trim())).collect(Collectors.toCollection(TreeSet::new));
        }
    }

    /** Waits until every rank of attempt 0 waits (the victim outside the all-reduce), then SIGKILLs the victim's executor. */
    private static KilledExecutor killVictimWhenAllWait(Path dir, CompletableFuture<?> job) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(TIMEOUT_S);
        while (IntStream.range(0, RANKS).anyMatch(r -> !Files.exists(dir.resolve("waiting-" + r)))) {
            if (job.isDone()) {
                job.get(); // throws what ended it
            }
            assertTrue(System.nanoTime() < deadline, "the ranks did not all reach the all-reduce");
            Thread.sleep(50);
        }
        long pid = Long.parseLong(read(dir.resolve("pid-" + VICTIM + "-0")).trim());
        assertNotEquals(ProcessHandle.current().pid(), pid, "ranks run in executor JVMs");
        Set<Integer> dead = new TreeSet<>();
        for (int r = 0; r < RANKS; r++) {
            if (Long.parseLong(read(dir.resolve("pid-" + r + "-0")).trim()) == pid) {
                dead.add(r);
            }
        }
        assertEquals(RANKS / EXECUTORS, dead.size(), "ranks per executor");
        assertTrue(ProcessHandle.of(pid).orElseThrow().destroyForcibly(), "SIGKILL to pid " + pid);
        System.out.println("killed executor pid " + pid + " with ranks " + dead);
        return new KilledExecutor(pid, dead);
    }

    private static List<Long> executorProcesses() {
        return LocalExecutors.processes(spark.sparkContext());
    }
}
