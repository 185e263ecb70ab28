package org.sparkccl.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import java.util.stream.LongStream;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.spark.SparkException;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.sparkccl.arrow.GradientBuffer;
import org.sparkccl.arrow.TensorLayout;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.transport.LocalMemoryTransport;
import org.sparkccl.core.shm.ShmTransport;

/** Barrier stages in Spark's local mode, 4 ranks as threads of one JVM. */
class LocalBarrierStageTest {
    private static final int RANKS = 4;
    private static SparkSession spark;
    private static JavaSparkContext jsc;

    @BeforeAll
    static void start() {
        spark = SparkSession.builder().config(SparkTestSupport.localConf(RANKS, "sparkccl-local")).getOrCreate();
        jsc = JavaSparkContext.fromSparkContext(spark.sparkContext());
    }

    @AfterAll
    static void stop() {
        if (spark != null) {
            spark.stop();
        }
        assertEquals(0, SparkCcl.openCount(), "communicators left open after the tasks completed");
        assertEquals(0, ShmTransport.mappedBytesInJvm(), "shared memory left mapped");
        assertEquals(0, LocalMemoryTransport.outstandingBytesInJvm(), "process memory left allocated");
    }

    private static JavaRDD<Integer> ranks() {
        return jsc.parallelize(IntStream.range(0, RANKS).boxed().collect(Collectors.toList()), RANKS);
    }

    /** What one rank saw, sent back to the driver. */
    static final class RankReport implements Serializable {
        final int rank;
        final double maxError;
        final double checksum;
        final int placements;
        final boolean sameCommunicator;

        RankReport(int rank, double maxError, double checksum, int placements, boolean sameCommunicator) {
            this.rank = rank;
            this.maxError = maxError;
            this.checksum = checksum;
            this.placements = placements;
            this.sameCommunicator = sameCommunicator;
        }
    }

    @Test
    void allReduceOfRandomFloatsMatchesFloat64Reference() {
        int count = 100_003; // prime: no chunking lines up with it
        long seed = 42;
        long collectivesBefore = CclMetrics.collectives();
        long bytesBefore = CclMetrics.bytes();
        List<RankReport> reports = new ArrayList<>(SparkCclJobs.barrierMapPartitions(ranks(), part -> {
            Communicator comm = SparkCcl.communicator();
            float[] data = SparkTestSupport.randomFloats(seed, comm.rank(), count);
            comm.allReduce(data, ReduceOp.SUM);
            double[] reference = SparkTestSupport.referenceSum(seed, comm.size(), count);
            double maxError = 0;
            double checksum = 0;
            for (int i = 0; i < count; i++) {
                maxError = Math.max(maxError, Math.abs(data[i] - reference[i]));
                checksum += data[i] * (i % 7 + 1);
            }
            return Collections.singletonList(new RankReport(comm.rank(), maxError, checksum,
                    SparkCcl.placements().size(), SparkCcl.communicator() == comm)).iterator();
        }).collect());
        assertEquals(RANKS, reports.size());
        for (RankReport report : reports) {
            assertTrue(report.maxError < 1e-5, "rank " + report.rank + " max error " + report.maxError);
            assertEquals(reports.get(0).checksum, report.checksum, "ranks disagree on the result");
            assertEquals(RANKS, report.placements);
            assertTrue(report.sameCommunicator, "a second call in one task must return the same communicator");
        }
        // Local mode: the ranks ran in this JVM, so their counters are ours to read.
        assertEquals(RANKS, CclMetrics.collectives() - collectivesBefore);
        assertEquals((long) RANKS * count * 4, CclMetrics.bytes() - bytesBefore);
        // ... and the executor plugin put the same counters into Spark's metrics system.
        List<org.apache.spark.metrics.source.Source> sources = scala.jdk.javaapi.CollectionConverters.asJava(
                org.apache.spark.SparkEnv.get().metricsSystem().getSourcesByName("plugin." + SparkCclPlugin.class.getName()));
        assertEquals(1, sources.size(), "sparkccl's metrics source is registered");
        com.codahale.metrics.MetricRegistry registry = sources.get(0).metricRegistry();
        assertEquals(CclMetrics.collectives(), registry.counter("collectives").getCount());
        assertEquals(CclMetrics.bytes(), registry.counter("bytes").getCount());
        assertTrue(registry.timer("collectiveTime").getCount() >= RANKS);
    }

    @Test
    void gradientBufferIsReducedInPlace() {
        long seed = 7;
        int count = 257 * 33 + 33;
        List<Double> errors = SparkCclJobs.barrierMapPartitions(ranks(), part -> {
            Communicator comm = SparkCcl.communicator();
            TensorLayout layout = TensorLayout.builder().add("w", 257, 33).add("b", 33).build();
            try (BufferAllocator allocator = new RootAllocator();
                 GradientBuffer gradients = GradientBuffer.allocate(allocator, layout)) {
                gradients.copyFrom(SparkTestSupport.randomFloats(seed, comm.rank(), count));
                long address = gradients.address();
                gradients.allReduce(comm, ReduceOp.SUM);
                if (gradients.address() != address) {
                    throw new AssertionError("the buffer moved");
                }
                double[] expected = new double[count];
                for (int r = 0; r < comm.size(); r++) {
                    float[] theirs = SparkTestSupport.randomFloats(seed, r, count);
                    for (int i = 0; i < count; i++) {
                        expected[i] += theirs[i];
                    }
                }
                double maxError = 0;
                for (int i = 0; i < count; i++) {
                    maxError = Math.max(maxError, Math.abs(gradients.getFloat(i) - expected[i]));
                }
                return Collections.singletonList(maxError).iterator();
            }
        }).collect();
        assertEquals(RANKS, errors.size());
        for (double error : errors) {
            assertTrue(error < 1e-5, "max error " + error);
        }
    }

    @Test
    void datasetHelperRunsOneRankPerPartition() {
        Dataset<Long> numbers = spark.createDataset(LongStream.rangeClosed(1, 1000).boxed().collect(Collectors.toList()),
                Encoders.LONG()).repartition(RANKS);
        Dataset<Long> totals = SparkCclJobs.barrierMapPartitions(numbers, rows -> {
            long sum = 0;
            while (rows.hasNext()) {
                sum += rows.next();
            }
            long[] shared = {sum};
            SparkCcl.communicator().allReduce(shared, ReduceOp.SUM);
            return Collections.singletonList(shared[0]).iterator();
        }, Encoders.LONG());
        List<Long> out = totals.collectAsList();
        assertEquals(RANKS, out.size());
        for (long total : out) {
            assertEquals(500_500L, total);
        }
    }

    @Test
    void communicatorOutsideABarrierStageIsRefused() {
        IllegalStateException onDriver = assertThrows(IllegalStateException.class, SparkCcl::communicator);
        assertTrue(onDriver.getMessage().contains("works inside a Spark task"), onDriver.getMessage());

        SparkException inTask = assertThrows(SparkException.class, () -> ranks().mapPartitions(part -> {
            SparkCcl.communicator();
            return Collections.<Integer>emptyIterator();
        }).count());
        assertTrue(rootMessage(inTask).contains("needs a barrier stage"), rootMessage(inTask));
    }

    /** Ranks waiting in a collective, and what ended their wait (local mode: the tasks share these with the test). */
    private static final java.util.concurrent.atomic.AtomicInteger WAITING = new java.util.concurrent.atomic.AtomicInteger();
    private static final List<String> WAIT_ENDINGS = Collections.synchronizedList(new ArrayList<>());

    @Test
    @org.junit.jupiter.api.Timeout(value = 120, unit = java.util.concurrent.TimeUnit.SECONDS)
    void aKilledJobEndsTheCollectivesItsRanksWaitIn() throws Exception {
        WAITING.set(0);
        WAIT_ENDINGS.clear();
        jsc.setJobGroup("doomed", "ranks 1..3 wait for rank 0, which never comes", false); // no thread interrupts
        java.util.concurrent.CompletableFuture<Long> job = java.util.concurrent.CompletableFuture.supplyAsync(
                () -> SparkCclJobs.barrierMapPartitions(ranks(), part -> {
                    Communicator comm = SparkCcl.communicator();
                    org.apache.spark.TaskContext task = org.apache.spark.TaskContext.get();
                    if (comm.rank() == 0) {
                        while (!task.isInterrupted()) {
                            Thread.sleep(10);
                        }
                        return Collections.<Integer>emptyIterator();
                    }
                    WAITING.incrementAndGet();
                    try {
                        comm.allReduce(new float[1000], ReduceOp.SUM);
                        WAIT_ENDINGS.add("completed");
                    } catch (RuntimeException e) {
                        WAIT_ENDINGS.add(e.getClass().getSimpleName() + ": " + e.getMessage());
                        throw e;
                    }
                    return Collections.<Integer>emptyIterator();
                }).count());
        jsc.clearJobGroup();
        while (WAITING.get() < RANKS - 1) {
            Thread.sleep(20);
        }
        Thread.sleep(200); // let them settle into the wait loop
        jsc.cancelJobGroup("doomed");
        java.util.concurrent.ExecutionException e = assertThrows(java.util.concurrent.ExecutionException.class, job::get);
        assertTrue(rootMessage(e).contains("cancelled"), rootMessage(e));
        while (SparkCcl.openCount() > 0 || WAIT_ENDINGS.size() < RANKS - 1) {
            Thread.sleep(20); // the killed tasks finish their completion listeners
        }
        for (String ending : WAIT_ENDINGS) {
            assertTrue(ending.contains("cancel") || ending.contains("kill") || ending.contains("interrupt"),
                    "a wait ended by the kill, not by a timeout or a peer: " + ending);
        }
    }

    static String rootMessage(Throwable t) {
        StringBuilder all = new StringBuilder();
        for (Throwable c = t; c != null; c = c.getCause()) {
            all.append(c.getMessage()).append('\n');
        }
        return all.toString();
    }

    @Test
    void sameCommunicatorEachCallAndSameObjectIsReturned() {
        List<Boolean> same = SparkCclJobs.barrierMapPartitions(ranks(), part -> {
            Communicator first = SparkCcl.communicator();
            assertSame(first, SparkCcl.communicator());
            return Collections.singletonList(SparkCcl.gpu().hasGpu()).iterator();
        }).collect();
        assertEquals(List.of(false, false, false, false), same, "no GPU in local mode without CUDA");
    }

    /** What a rank produced and what it knew of its stage. */
    static final class Tagged implements Serializable {
        final int rank;
        final int item;
        final StageRetry.Kind stage;

        Tagged(int rank, int item, StageRetry.Kind stage) {
            this.rank = rank;
            this.item = item;
            this.stage = stage;
        }
    }

    private static java.util.Iterator<Tagged> threeItemsAndTheStageKind() {
        SparkCcl.communicator();
        int rank = org.apache.spark.TaskContext.getPartitionId();
        StageRetry.Kind kind = StageRetry.of(org.apache.spark.TaskContext.get()).kind();
        return IntStream.range(0, 3).mapToObj(i -> new Tagged(rank, rank * 10 + i, kind)).iterator();
    }

    @Test
    void aRetryableStageFeedsAShuffleAndKeepsRankOrder() {
        JavaRDD<Tagged> out = SparkCclJobs.retryableBarrierMapPartitions(ranks(), part -> threeItemsAndTheStageKind());
        assertEquals(RANKS, out.getNumPartitions());
        List<List<Tagged>> partitions = out.glom().collect();
        for (int r = 0; r < RANKS; r++) {
            List<Integer> items = partitions.get(r).stream().map(t -> t.item).collect(Collectors.toList());
            assertEquals(List.of(r * 10, r * 10 + 1, r * 10 + 2), items, "partition " + r + " holds rank " + r + "'s output");
            for (Tagged t : partitions.get(r)) {
                assertEquals(StageRetry.Kind.RETRYABLE, t.stage, "marked by the retryable wrapper");
            }
        }
        Dataset<Integer> ds = SparkCclJobs.retryableBarrierMapPartitions(spark.createDataset(
                IntStream.range(0, RANKS).boxed().collect(Collectors.toList()), Encoders.INT()).repartition(RANKS),
                rows -> threeItems(), Encoders.INT());
        assertEquals(List.of(0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32), ds.collectAsList());
    }

    private static java.util.Iterator<Integer> threeItems() {
        List<Integer> items = new ArrayList<>();
        threeItemsAndTheStageKind().forEachRemaining(t -> items.add(t.item));
        return items.iterator();
    }

    @Test
    void aPlainBarrierStageKnowsWhetherSparkRetriesIt() {
        List<Tagged> collected = SparkCclJobs.barrierMapPartitions(ranks(), part -> threeItemsAndTheStageKind()).collect();
        assertTrue(collected.stream().allMatch(t -> t.stage == StageRetry.Kind.RESULT), "collect(): a result stage");
        List<Tagged> shuffled = SparkCclJobs.barrierMapPartitions(ranks(), part -> threeItemsAndTheStageKind())
                .repartition(2).collect();
        assertTrue(shuffled.stream().allMatch(t -> t.stage == StageRetry.Kind.RETRYABLE),
                "feeding a shuffle: a ShuffleMapStage, which Spark retries");
    }
}
