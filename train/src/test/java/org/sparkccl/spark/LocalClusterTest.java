package org.sparkccl.spark;

import org.sparkccl.train.TrainJob;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.Serializable;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.MemoryKind;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.shm.ShmTransport;
import org.sparkccl.train.ModelSpec;
import org.sparkccl.train.OptimizerSpec;
import org.sparkccl.train.PreparedData;
import org.sparkccl.train.TrainConfig;
import org.sparkccl.train.TrainResult;
import org.sparkccl.train.TrainingData;

/**
 * A cluster whose executors are separate JVMs: 2 executors x 2 cores x 2 fake GPUs (a discovery
 * script hands out addresses 0 and 1; there is no CUDA here, so ranks work in host memory, but
 * Spark's GPU scheduling and sparkccl's binding and checks run for real). Executors take a while
 * to start, so one cluster serves every test in this class.
 */
class LocalClusterTest {
    private static final int EXECUTORS = 2;
    private static final int GPUS_PER_EXECUTOR = 2;
    private static final int RANKS = EXECUTORS * GPUS_PER_EXECUTOR;
    private static SparkSession spark;
    private static JavaSparkContext jsc;

    @BeforeAll
    static void start() throws InterruptedException {
        spark = SparkSession.builder().config(SparkTestSupport.localClusterConf(EXECUTORS, 2, GPUS_PER_EXECUTOR,
                "sparkccl-local-cluster").set("spark.sparkccl.timeoutMs", "120000")).getOrCreate();
        jsc = JavaSparkContext.fromSparkContext(spark.sparkContext());
        SparkTestSupport.awaitExecutors(spark.sparkContext(), EXECUTORS);
    }

    @AfterAll
    static void stop() {
        if (spark != null) {
            spark.stop();
        }
    }

    /** What a rank saw in its executor. */
    static final class RankView implements Serializable {
        final int rank;
        final List<TaskPlacement> placements;
        final GpuBinding gpu;
        final MemoryKind memoryKind;
        final double maxError;
        final long shmBytesMappedHere;
        final boolean pluginSettingsArrived;
        final long timeoutMs;

        RankView(int rank, List<TaskPlacement> placements, GpuBinding gpu, MemoryKind memoryKind, double maxError,
                 long shmBytesMappedHere, boolean pluginSettingsArrived, long timeoutMs) {
            this.rank = rank;
            this.placements = new ArrayList<>(placements);
            this.gpu = gpu;
            this.memoryKind = memoryKind;
            this.maxError = maxError;
            this.shmBytesMappedHere = shmBytesMappedHere;
            this.pluginSettingsArrived = pluginSettingsArrived;
            this.timeoutMs = timeoutMs;
        }
    }

    @Test
    void ranksInSeparateExecutorsGetDistinctGpusAndReduceOverSharedMemory() {
        int count = 65_537;
        long seed = 99;
        JavaRDD<Integer> ranks = jsc.parallelize(IntStream.range(0, RANKS).boxed().collect(Collectors.toList()), RANKS);
        List<RankView> views = new ArrayList<>(SparkCclJobs.barrierMapPartitions(ranks, part -> {
            Communicator comm = SparkCcl.communicator();
            double maxError = SparkTestSupport.allReduceMaxError(comm, seed, count);
            return Collections.singletonList(new RankView(comm.rank(), SparkCcl.placements(), SparkCcl.gpu(),
                    comm.memoryKind(), maxError, ShmTransport.mappedBytesInJvm(),
                    SparkCclExecutorPlugin.settingsFromDriver() != null,
                    SparkCclSettings.forCurrentProcess().get(Params.TIMEOUT_MS))).iterator();
        }).collect());
        assertEquals(RANKS, views.size());

        List<TaskPlacement> placements = views.get(0).placements;
        Set<String> executorGpuPairs = new HashSet<>();
        Set<Long> pids = new HashSet<>();
        for (TaskPlacement p : placements) {
            executorGpuPairs.add(p.executorId() + "/" + p.gpu());
            pids.add(p.pid());
            assertEquals(GpuBinding.Source.SPARK, p.gpuSource(), "Spark assigned " + p);
        }
        assertEquals(RANKS, executorGpuPairs.size(), "each rank has its own (executor, GPU): " + placements);
        assertEquals(EXECUTORS, pids.size(), "ranks live in " + EXECUTORS + " executor JVMs: " + placements);
        assertTrue(!pids.contains(ProcessHandle.current().pid()), "no rank runs in the driver");

        for (RankView v : views) {
            assertTrue(v.maxError < 1e-5, "rank " + v.rank + " max error " + v.maxError);
            assertEquals(placements.size(), v.placements.size());
            assertEquals(placements.get(v.rank).gpu(), v.gpu.address(), "rank " + v.rank + " is bound to its own GPU");
            assertEquals(MemoryKind.HOST, v.memoryKind, "no CUDA here: the host engine, fake GPU addresses or not");
            // Ranks in other processes can only be reached through shared memory, and each executor maps it.
            assertTrue(v.shmBytesMappedHere > 0, "rank " + v.rank + " maps no shared memory");
            assertTrue(v.pluginSettingsArrived, "the executor plugin received the driver's settings");
            assertEquals(120_000L, v.timeoutMs, "spark.sparkccl.timeoutMs reached the executors");
        }
    }

    @Test
    void trainJobMatchesSingleProcessAndResumesExactly(@TempDir Path dir) {
        PreparedData data = PreparedData.of(TrainingData.digits(spark), null, null, RANKS);
        ModelSpec model = new ModelSpec(ModelSpec.Kind.MLP, data.stats().cols(), 16, data.stats().classes());
        OptimizerSpec adam = new OptimizerSpec(OptimizerSpec.Kind.ADAM, 0.01, 0.9);
        String straight = dir.resolve("straight").toUri().toString();
        String halves = dir.resolve("halves").toUri().toString();
        TrainConfig full = new TrainConfig(model, adam, 96, 60, 5, 20, straight, 30, false, java.util.Map.of());

        TrainResult uninterrupted = TrainJob.train(data, full);
        TrainResult reference = TrainJob.trainSingleProcess(data.collectAll(), data.stats(), full);
        TrainResult firstHalf = TrainJob.train(data, full.withSteps(30, halves, 30, false));
        TrainResult resumed = TrainJob.train(data, full.withSteps(60, halves, 30, true));
        data.release();

        double[] losses = uninterrupted.losses();
        assertEquals(60, losses.length);
        assertTrue(losses[59] < 0.5 * losses[0], "the loss must fall: " + losses[0] + " -> " + losses[59]);
        double diff = TrainJob.maxRelativeDifference(losses, reference.losses());
        assertTrue(diff < 1e-4, "distributed and single-process loss curves differ by " + diff);
        assertEquals(reference.accuracy(), uninterrupted.accuracy(), 0.01);

        assertEquals(30, firstHalf.losses().length);
        assertEquals(30, resumed.firstStep());
        assertArrayEquals(uninterrupted.weights(), resumed.weights(), "checkpoint then resume = uninterrupted");
    }
}
