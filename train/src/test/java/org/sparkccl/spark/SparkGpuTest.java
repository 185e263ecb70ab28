package org.sparkccl.spark;

import org.sparkccl.train.TrainJob;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.io.Serializable;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.sparkccl.arrow.ElementType;
import org.sparkccl.arrow.GradientBuffer;
import org.sparkccl.core.memory.HostMemorySources;
import org.sparkccl.arrow.TensorLayout;
import org.sparkccl.core.CclException;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.DataType;
import org.sparkccl.core.memory.HostStagingBuffer;
import org.sparkccl.core.MemoryKind;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.StagingBuffer;
import org.sparkccl.core.check.ReferenceCheck;
import org.sparkccl.ipc.gpu.GpuCommunicator;
import org.sparkccl.train.ComputePath;
import org.sparkccl.train.ModelSpec;
import org.sparkccl.train.OptimizerSpec;
import org.sparkccl.train.PreparedData;
import org.sparkccl.train.TrainConfig;
import org.sparkccl.train.TrainResult;
import org.sparkccl.train.TrainingData;
import org.sparkccl.core.engine.Engines;

/**
 * Spark on real GPUs, as users run it (scripts/spark-gpu-test.sh runs this on the GPU machine, in a
 * JVM with Spark's own options only): {@code local-cluster} executors started by Spark's workers
 * with GPUs from discovery scripts, ranks in barrier tasks, the GPU engine. Three layouts: one
 * executor per GPU (ranks in separate processes, CUDA IPC), one executor holding every GPU (ranks
 * are same-process peers), and two ranks sharing one GPU. Each checks every type and op on odd
 * counts against a float64 reference, that a count mismatch fails every rank with the message, and
 * TrainJob on the GPUs (matches its single-process reference; checkpoint then resume equals an
 * uninterrupted run). Per-step all-reduce times of a 64 MB gradient are printed ({@code MEASURED}
 * lines) for the script to compare with allreduce-perf: a benchmark, never asserted here.
 */
@Tag("gpu")
class SparkGpuTest {
    private static final long SEED = 20_261_201L;
    private static final long[] COUNTS = {1, 3, 1009, 65_537};
    private static final int BENCH_BYTES = 64 << 20;

    private static int visibleGpus() {
        int n = Engines.visibleGpus();
        assumeTrue(n > 0, "no usable GPU here: " + Engines.gpuUnavailableReason());
        return n;
    }

    @Test
    void oneExecutorPerGpu(@TempDir Path dir) throws Exception {
        int gpus = visibleGpus();
        assumeTrue(gpus >= 2, "one executor per GPU needs 2 GPUs; this machine has " + gpus);
        SparkConf conf = GpuClusters.gpuCluster(dir, "local-cluster[" + gpus + ",1,8192]", GpuClusters.claimScript(dir, gpus), 1, 1, "1")
                .set("spark.executor.cores", "1");
        runLayout(conf, gpus, "executor-per-gpu", gpus, true, "P2P/CUMEM|P2P/IPC", dir);
    }

    @Test
    void oneExecutorWithEveryGpu(@TempDir Path dir) throws Exception {
        int gpus = visibleGpus();
        assumeTrue(gpus >= 2, "one executor with several GPUs needs 2 GPUs; this machine has " + gpus);
        SparkConf conf = GpuClusters.gpuCluster(dir, "local-cluster[1," + gpus + ",16384]", GpuClusters.listScript(dir, gpus), gpus, gpus, "1")
                .set("spark.executor.cores", Integer.toString(gpus));
        runLayout(conf, gpus, "one-executor", 1, true, "P2P/direct", dir);
    }

    @Test
    void twoRanksShareOneGpu(@TempDir Path dir) throws Exception {
        visibleGpus();
        SparkConf conf = GpuClusters.gpuCluster(dir, "local-cluster[1,2,8192]", GpuClusters.listScript(dir, 1), 1, 1, "0.5")
                .set("spark.executor.cores", "2")
                .set("spark.sparkccl.allowSharedGpu", "true");
        runLayout(conf, 2, "shared-gpu", 1, false, "P2P/direct", dir);
    }

    /**
     * Two executors (processes) on one GPU: CUDA IPC between executor JVMs, the path that once failed
     * in every executor. Their kernels time-slice on the GPU, so this checks correctness, not speed.
     */
    @Test
    void twoExecutorsShareOneGpu(@TempDir Path dir) throws Exception {
        visibleGpus();
        SparkConf conf = GpuClusters.gpuCluster(dir, "local-cluster[2,1,8192]", GpuClusters.listScript(dir, 1), 1, 1, "1")
                .set("spark.executor.cores", "1")
                .set("spark.sparkccl.allowSharedGpu", "true");
        runLayout(conf, 2, "shared-gpu-2-executors", 2, false, "P2P/CUMEM|P2P/IPC", dir);
    }

    /**
     * An executor JVM SIGKILLed mid-training on the GPUs: Spark retries TrainJob's stage, the retry
     * resumes from the newest checkpoint and ends where an uninterrupted run from that checkpoint ends;
     * the surviving and the relaunched executor hold no sparkccl GPU or pinned memory, communicator or
     * mapping afterwards, and /dev/shm keeps nothing of the job. One executor per GPU where there are
     * two GPUs, else two executors sharing one.
     */
    @Test
    void executorLostMidTrainingIsRetriedOnTheGpus(@TempDir Path dir) throws Exception {
        int gpus = visibleGpus();
        SparkConf conf = gpus >= 2
                ? GpuClusters.gpuCluster(dir, "local-cluster[2,1,8192]", GpuClusters.claimScript(dir, 2), 1, 1, "1")
                : GpuClusters.gpuCluster(dir, "local-cluster[2,1,8192]", GpuClusters.listScript(dir, 1), 1, 1, "1")
                        .set("spark.sparkccl.allowSharedGpu", "true");
        conf.set("spark.executor.cores", "1");
        SparkSession spark = SparkSession.builder().config(conf.setAppName("sparkccl-gpu-executor-loss")).getOrCreate();
        try {
            SparkTestSupport.awaitExecutors(spark.sparkContext(), 2);
            JavaSparkContext jsc = JavaSparkContext.fromSparkContext(spark.sparkContext());
            List<GpuExecutorHoldings> before = GpuExecutorHoldings.read(jsc, 2);
            PreparedData data = PreparedData.of(TrainingData.digits(spark), null, null, 2);
            ModelSpec model = new ModelSpec(ModelSpec.Kind.MLP, data.stats().cols(), 32, data.stats().classes());
            OptimizerSpec adam = new OptimizerSpec(OptimizerSpec.Kind.ADAM, 0.01, 0.9);
            Path checkpoints = dir.resolve("checkpoints");
            Path copies = dir.resolve("copies");
            Files.createDirectories(checkpoints);
            TrainConfig config = new TrainConfig(model, adam, 128, 400, 5, 100, checkpoints.toUri().toString(), 20,
                    false, Map.of()).withCompute(ComputePath.Choice.GPU);
            long victim = LocalExecutors.processes(spark.sparkContext()).get(0);
            long start = System.nanoTime();
            KilledTraining killed = KilledTraining.trainKillingOne(data, config, checkpoints, copies, victim);
            System.out.printf(Locale.ROOT, "LAYOUT executor-loss: executor pid %d killed after checkpoint %d; the"
                            + " retry resumed from step %d; job %.1f s%n", victim, killed.killedAfterStep,
                    killed.result.firstStep(), (System.nanoTime() - start) / 1e9);
            killed.assertResumedExactly(spark.sparkContext(), data, config, copies);
            data.release();

            SparkTestSupport.awaitExecutors(spark.sparkContext(), 2);
            List<GpuExecutorHoldings> after = GpuExecutorHoldings.read(jsc, 2);
            Set<Long> pids = new HashSet<>();
            for (GpuExecutorHoldings h : before) {
                pids.add(h.pid);
            }
            for (GpuExecutorHoldings h : after) {
                pids.add(h.pid);
                System.out.println("LAYOUT executor-loss after: " + h);
                assertEquals(0, h.deviceBytes + h.pinnedBytes + h.openCommunicators + h.shmBytesMapped, h.toString());
            }
            before.forEach(h -> System.out.println("LAYOUT executor-loss before: " + h));
            assertTrue(pids.contains(victim) && !after.stream().anyMatch(h -> h.pid == victim), "pids " + pids);
            List<String> left = LocalExecutors.list(Paths.get("/dev/shm")).stream()
                    .map(f -> f.getFileName().toString())
                    .filter(name -> pids.stream().anyMatch(pid -> name.startsWith("sparkccl-" + pid + "-")))
                    .collect(Collectors.toList());
            assertEquals(List.of(), left, "segments of the job's executors in /dev/shm");
        } finally {
            spark.stop();
        }
    }

    private static void runLayout(SparkConf conf, int ranks, String layout, int processes, boolean distinctGpus,
                                  String via, Path dir) throws Exception {
        long start = System.nanoTime();
        SparkSession spark = SparkSession.builder().config(conf.setAppName("sparkccl-gpu-" + layout)).getOrCreate();
        try {
            JavaSparkContext jsc = JavaSparkContext.fromSparkContext(spark.sparkContext());
            SparkTestSupport.awaitExecutors(spark.sparkContext(), processes);
            System.out.printf(Locale.ROOT, "LAYOUT %s: %d executors up after %.1f s%n", layout, processes,
                    (System.nanoTime() - start) / 1e9);
            checkEveryTypeAndOp(jsc, ranks, layout, processes, distinctGpus, via);
            checkCountMismatch(jsc, ranks, layout);
            if (distinctGpus) {
                measureStepAllReduce(jsc, ranks, layout);
            }
            checkTrainJob(spark, ranks, layout, dir);
        } finally {
            spark.stop();
        }
    }

    /** What a rank saw. */
    static final class RankReport implements Serializable {
        final int rank;
        final long pid;
        final String executor;
        final String gpu;
        final MemoryKind memory;
        final String links;
        final long checked;
        final long wrong;
        final String firstWrong;

        RankReport(int rank, long pid, String executor, String gpu, MemoryKind memory, String links, long checked,
                   long wrong, String firstWrong) {
            this.rank = rank;
            this.pid = pid;
            this.executor = executor;
            this.gpu = gpu;
            this.memory = memory;
            this.links = links;
            this.checked = checked;
            this.wrong = wrong;
            this.firstWrong = firstWrong;
        }
    }

    private static void checkEveryTypeAndOp(JavaSparkContext jsc, int ranks, String layout, int processes,
                                            boolean distinctGpus, String via) {
        List<RankReport> reports = new ArrayList<>(SparkCclJobs.barrierMapPartitions(partitions(jsc, ranks), part -> {
            Communicator comm = SparkCcl.communicator();
            long checked = 0;
            long wrong = 0;
            String firstWrong = "";
            for (DataType type : DataType.values()) {
                for (ReduceOp op : ReduceOp.values()) {
                    for (long count : COUNTS) {
                        for (boolean inPlace : new boolean[] {true, false}) {
                            String key = type.ncclName() + "/" + op.ncclName() + "/" + count + (inPlace ? "/in" : "/out");
                            ReferenceCheck.Result r = reduceOnDevice(comm, type, op, count, inPlace, key);
                            checked++;
                            if (r.wrong() > 0) {
                                wrong += r.wrong();
                                firstWrong = firstWrong.isEmpty() ? key + ": " + r : firstWrong;
                            }
                        }
                    }
                }
            }
            Communicator engine = ((MeteredCommunicator) comm).inner();
            String links = engine instanceof GpuCommunicator ? ((GpuCommunicator) engine).describeLinks() : engine.toString();
            return Collections.singletonList(new RankReport(comm.rank(), ProcessHandle.current().pid(),
                    SparkCcl.placements().get(comm.rank()).executorId(), SparkCcl.gpu().address(), comm.memoryKind(),
                    links, checked, wrong, firstWrong)).iterator();
        }).collect());
        assertEquals(ranks, reports.size());
        Set<String> gpus = new HashSet<>();
        Set<Long> pids = new HashSet<>();
        for (RankReport r : reports) {
            System.out.printf(Locale.ROOT, "LAYOUT %s rank %d: executor %s pid %d GPU %s, %s; %d cases, %d wrong%n",
                    layout, r.rank, r.executor, r.pid, r.gpu, r.links, r.checked, r.wrong);
            assertEquals(MemoryKind.DEVICE, r.memory, "rank " + r.rank + " did not get the GPU engine: " + r.links);
            assertEquals(0, r.wrong, "rank " + r.rank + ": " + r.firstWrong);
            // "A|B": either (windows across processes are CUDA virtual memory shared by descriptor where the
            // driver can, else CUDA IPC).
            assertTrue(Arrays.stream(via.split("\\|")).anyMatch(r.links::contains),
                    "rank " + r.rank + " should connect via " + via + ": " + r.links);
            gpus.add(r.gpu);
            pids.add(r.pid);
        }
        assertEquals(distinctGpus ? ranks : 1, gpus.size(), "GPUs of the ranks: " + gpus);
        assertEquals(processes, pids.size(), "processes of the ranks: " + pids);
    }

    /** One all-reduce in device memory (the communicator's staging buffers), checked against float64. */
    private static ReferenceCheck.Result reduceOnDevice(Communicator comm, DataType type, ReduceOp op, long count,
                                                       boolean inPlace, String key) {
        long bytes = count * type.size();
        ReferenceCheck check = new ReferenceCheck(type, op, comm.size(), ReferenceCheck.seed(SEED, key));
        byte[] raw = new byte[(int) bytes];
        try (HostStagingBuffer host = new HostStagingBuffer(bytes);
             StagingBuffer send = comm.allocateStaging(bytes);
             StagingBuffer recv = comm.allocateStaging(bytes)) {
            check.fillInput(comm.rank(), host.address(), 0, count);
            host.copyOut(raw, bytes);
            send.copyIn(raw, bytes);
            StagingBuffer result = inPlace ? send : recv;
            comm.allReduce(send.address(), result.address(), count, type, op);
            result.copyOut(raw, bytes);
            host.copyIn(raw, bytes);
            return check.checkReduced(host.address(), 0, count);
        }
    }

    private static void checkCountMismatch(JavaSparkContext jsc, int ranks, String layout) {
        long start = System.nanoTime();
        List<String> messages = new ArrayList<>(SparkCclJobs.barrierMapPartitions(partitions(jsc, ranks), part -> {
            Communicator comm = SparkCcl.communicator();
            long count = comm.rank() == comm.size() - 1 ? 1001 : 1000;
            try (StagingBuffer buffer = comm.allocateStaging(1001 * 4)) {
                comm.allReduce(buffer.address(), buffer.address(), count, DataType.FLOAT32, ReduceOp.SUM);
                return Collections.singletonList("rank " + comm.rank() + ": NO ERROR").iterator();
            } catch (CclException e) {
                return Collections.singletonList("rank " + comm.rank() + ": " + e.getMessage()).iterator();
            }
        }).collect());
        double seconds = (System.nanoTime() - start) / 1e9;
        assertEquals(ranks, messages.size());
        for (String m : messages) {
            System.out.println("LAYOUT " + layout + " mismatch: " + m);
            assertTrue(m.contains("1000") && m.contains("1001"), "every rank names both calls: " + m);
        }
        System.out.printf(Locale.ROOT, "LAYOUT %s: count mismatch reported on all %d ranks, stage %.1f s%n", layout,
                ranks, seconds);
        // Not caught, the same mismatch fails the stage with that message.
        Exception failed = assertThrows(Exception.class, () -> SparkCclJobs.barrierMapPartitions(partitions(jsc, ranks),
                part -> {
                    Communicator comm = SparkCcl.communicator();
                    long count = comm.rank() == 0 ? 7 : 8;
                    try (StagingBuffer buffer = comm.allocateStaging(64)) {
                        comm.allReduce(buffer.address(), buffer.address(), count, DataType.FLOAT32, ReduceOp.SUM);
                    }
                    return Collections.singletonList(0).iterator();
                }).collect());
        String why = String.valueOf(failed.getMessage());
        assertTrue(why.contains("collective mismatch") && why.contains("count 7") && why.contains("count 8"),
                "the stage fails with the mismatch: " + why);
    }

    /** A training step's all-reduce of a 64 MB float32 gradient, timed inside the barrier task. */
    private static void measureStepAllReduce(JavaSparkContext jsc, int ranks, String layout) {
        List<String> lines = new ArrayList<>(SparkCclJobs.barrierMapPartitions(partitions(jsc, ranks), part -> {
            Communicator comm = SparkCcl.communicator();
            int count = BENCH_BYTES / 4;
            float[] gradient = SparkTestSupport.randomFloats(SEED, comm.rank(), count);
            List<String> out = new ArrayList<>();
            try (StagingBuffer device = comm.allocateStaging(BENCH_BYTES)) {
                device.copyIn(gradient, BENCH_BYTES);
                double us = timeCalls(comm, device.address(), count, 5, 20);
                out.add(String.format(Locale.ROOT, "MEASURED %s device-memory 64MB rank %d: %.1f us/call busbw %.1f GB/s",
                        layout, comm.rank(), us, busbw(us, comm.size())));
            }
            TensorLayout shape = TensorLayout.flat("g", count);
            try (BufferAllocator allocator = new RootAllocator();
                 GradientBuffer pinned = GradientBuffer.allocate(allocator, "g", shape, ElementType.FLOAT32,
                         HostMemorySources.preferred())) {
                for (int i = 0; i < count; i++) {
                    pinned.setFloat(i, gradient[i]);
                }
                pinned.allReduce(comm, ReduceOp.SUM); // warm-up, and a check: element 0 against float64
                double expected = 0;
                for (int r = 0; r < comm.size(); r++) {
                    expected += SparkTestSupport.randomFloats(SEED, r, 1)[0];
                }
                if (Math.abs(pinned.getFloat(0) - expected) > 1e-5 * comm.size()) {
                    throw new AssertionError("pinned GradientBuffer element 0: " + pinned.getFloat(0) + " vs " + expected);
                }
                long t0 = System.nanoTime();
                int calls = 10;
                for (int i = 0; i < calls; i++) {
                    pinned.allReduce(comm, ReduceOp.SUM);
                }
                double us = (System.nanoTime() - t0) / 1e3 / calls;
                out.add(String.format(Locale.ROOT, "MEASURED %s pinned-gradientbuffer(%s) 64MB rank %d: %.1f us/call busbw %.1f GB/s",
                        layout, pinned.memorySource().name(), comm.rank(), us, busbw(us, comm.size())));
            }
            return out.iterator();
        }).collect());
        lines.forEach(System.out::println);
        assertEquals(2 * ranks, lines.size());
    }

    private static double timeCalls(Communicator comm, long address, long count, int warmup, int calls) {
        for (int i = 0; i < warmup; i++) {
            comm.allReduce(address, address, count, DataType.FLOAT32, ReduceOp.SUM);
        }
        comm.barrier();
        long t0 = System.nanoTime();
        for (int i = 0; i < calls; i++) {
            comm.allReduce(address, address, count, DataType.FLOAT32, ReduceOp.SUM);
        }
        return (System.nanoTime() - t0) / 1e3 / calls;
    }

    private static double busbw(double microseconds, int ranks) {
        return BENCH_BYTES / (microseconds * 1e3) * 2.0 * (ranks - 1) / ranks;
    }

    /** TrainJob on the GPUs: matches the single-process reference; checkpoint then resume = uninterrupted. */
    private static void checkTrainJob(SparkSession spark, int ranks, String layout, Path dir) {
        PreparedData data = PreparedData.of(TrainingData.digits(spark), null, null, ranks);
        try {
            ModelSpec model = new ModelSpec(ModelSpec.Kind.MLP, data.stats().cols(), 32, data.stats().classes());
            OptimizerSpec adam = new OptimizerSpec(OptimizerSpec.Kind.ADAM, 0.01, 0.9);
            String straight = dir.resolve(layout + "-straight").toUri().toString();
            String halves = dir.resolve(layout + "-halves").toUri().toString();
            TrainConfig full = new TrainConfig(model, adam, 128, 80, 5, 20, straight, 40, false, Map.of())
                    .withCompute(ComputePath.Choice.GPU);
            TrainResult gpu = TrainJob.train(data, full);
            TrainResult cpu = TrainJob.train(data, full.withSteps(80, dir.resolve(layout + "-cpu").toUri().toString(),
                    40, false).withCompute(ComputePath.Choice.CPU));
            TrainResult reference = TrainJob.trainSingleProcess(data.collectAll(), data.stats(), full);
            TrainResult firstHalf = TrainJob.train(data, full.withSteps(40, halves, 40, false));
            TrainResult resumed = TrainJob.train(data, full.withSteps(80, halves, 40, true));
            double diff = TrainJob.maxRelativeDifference(gpu.losses(), reference.losses());
            System.out.printf(Locale.ROOT, "MEASURED %s TrainJob mlp-32 batch 128, %d ranks: GPU %.0f samples/s, CPU %.0f"
                            + " samples/s; loss %.4f -> %.4f (reference %.4f); largest relative loss difference %.2e%n",
                    layout, ranks, gpu.samplesPerSecond(), cpu.samplesPerSecond(), gpu.losses()[0],
                    gpu.finalLoss(), reference.finalLoss(), diff);
            assertTrue(gpu.losses()[79] < 0.5 * gpu.losses()[0], "the loss must fall");
            assertTrue(diff < 1e-3, "GPU and single-process loss curves differ by " + diff);
            assertEquals(40, resumed.firstStep());
            assertArrayEquals(gpu.weights(), resumed.weights(), "checkpoint then resume = uninterrupted, on the GPUs");
            assertEquals(40, firstHalf.losses().length);
        } finally {
            data.release();
        }
    }

    private static JavaRDD<Integer> partitions(JavaSparkContext jsc, int ranks) {
        return jsc.parallelize(IntStream.range(0, ranks).boxed().collect(Collectors.toList()), ranks);
    }
}
