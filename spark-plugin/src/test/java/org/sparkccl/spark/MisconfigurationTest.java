package org.sparkccl.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaSparkContext;
import org.junit.jupiter.api.Test;
import org.sparkccl.core.CclException;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.wire.WireFormatException;

/** Each misconfiguration yields the message meant for it. */
class MisconfigurationTest {

    private static SparkConf conf(String master) {
        return new SparkConf(false).set("spark.master", master);
    }

    private static String refusal(SparkConf conf) {
        return assertThrows(IllegalArgumentException.class, () -> SparkConfCheck.validate(conf)).getMessage();
    }

    @Test
    void localModeWithTaskGpusIsRefusedBeforeSparkHangs() {
        String message = refusal(conf("local[4]").set("spark.task.resource.gpu.amount", "1"));
        assertTrue(message.contains("spark.task.resource.gpu.amount=1 is set with master local[4]"), message);
        assertTrue(message.contains("wait forever"), message);
        assertTrue(message.contains("rank r the GPU r mod"), message);
        // local-cluster has real executors that Spark gives resources to.
        SparkConfCheck.validate(conf("local-cluster[2,2,1024]").set("spark.task.resource.gpu.amount", "1"));
    }

    @Test
    void thePluginRefusesToStartAContextThatWouldHang() {
        SparkConf sparkConf = SparkTestSupport.localConf(2, "sparkccl-refused").set("spark.task.resource.gpu.amount", "1");
        Exception e = assertThrows(Exception.class, () -> {
            try (JavaSparkContext sc = new JavaSparkContext(sparkConf)) {
                sc.parallelize(List.of(1)).count();
            }
        });
        assertTrue(LocalBarrierStageTest.rootMessage(e).contains("Spark's local mode gives tasks no GPU resources"),
                LocalBarrierStageTest.rootMessage(e));
    }

    @Test
    void unknownSparkcclKeysAndBadValuesAreRefused() {
        String typo = refusal(conf("local[2]").set("spark.sparkccl.timeoutMS", "10"));
        assertTrue(typo.contains("unknown sparkccl parameter 'spark.sparkccl.timeoutMS'"), typo);
        assertTrue(typo.contains("timeoutMs"), "lists the known names: " + typo);
        String bad = refusal(conf("local[2]").set("spark.sparkccl.allowSharedGpu", "perhaps"));
        assertTrue(bad.contains("bad value 'perhaps' for ALLOW_SHARED_GPU"), bad);
    }

    @Test
    void everySparkcclParameterCanBeSetInSparkConf() {
        Params params = SparkConfCheck.validate(conf("local[2]")
                .set("spark.sparkccl.timeoutMs", "1234")
                .set("spark.sparkccl.allowSharedGpu", "true")
                .set("spark.sparkccl.buffsize", "2M"));
        assertEquals(1234L, params.get(Params.TIMEOUT_MS));
        assertTrue(params.get(SparkCclSettings.ALLOW_SHARED_GPU));
        assertEquals(2L << 20, params.get(Params.BUFFSIZE));
        for (var p : Params.all()) {
            assertEquals(p, Params.find(p.sparkConfKey()), "no Spark key for " + p.name());
        }
    }

    @Test
    void severalGpusPerTaskOrSharedGpusAreRefused() {
        String many = refusal(conf("spark://h:7077").set("spark.task.resource.gpu.amount", "2"));
        assertTrue(many.contains("a sparkccl rank drives exactly one GPU; set spark.task.resource.gpu.amount=1"), many);
        String shared = refusal(conf("spark://h:7077").set("spark.task.resource.gpu.amount", "0.5"));
        assertTrue(shared.contains("puts 2 tasks on one GPU"), shared);
        assertTrue(shared.contains("spark.sparkccl.allowSharedGpu=true"), shared);
        SparkConfCheck.validate(conf("spark://h:7077").set("spark.task.resource.gpu.amount", "0.5")
                .set("spark.sparkccl.allowSharedGpu", "true"));
    }

    @Test
    void moreTasksThanConfiguredGpuSlotsIsRefusedNamingTheSettings() {
        SparkConf cluster = conf("spark://h:7077").set("spark.executor.instances", "2")
                .set("spark.executor.resource.gpu.amount", "2").set("spark.task.resource.gpu.amount", "1");
        SparkConfCheck.checkBarrierStage(cluster, 4);
        String message = assertThrows(IllegalArgumentException.class,
                () -> SparkConfCheck.checkBarrierStage(cluster, 5)).getMessage();
        assertTrue(message.contains("5 tasks"), message);
        assertTrue(message.contains("4 GPU slots (2 executors x spark.executor.resource.gpu.amount=2"), message);
        assertTrue(message.contains("raise spark.executor.instances or spark.executor.resource.gpu.amount"), message);
        SparkConf localCluster = conf("local-cluster[2,2,1024]")
                .set("spark.executor.resource.gpu.amount", "2").set("spark.task.resource.gpu.amount", "1");
        assertThrows(IllegalArgumentException.class, () -> SparkConfCheck.checkBarrierStage(localCluster, 6));
    }

    @Test
    void taskGpuBindingRules() {
        GpuBinding fromSpark = GpuBinding.decide(3, 4, new String[] {"1"}, false, 0, false);
        assertEquals("1", fromSpark.address());
        assertEquals(GpuBinding.Source.SPARK, fromSpark.source());

        String many = assertThrows(IllegalStateException.class,
                () -> GpuBinding.decide(0, 4, new String[] {"0", "1"}, false, 2, false)).getMessage();
        assertTrue(many.contains("rank 0: Spark gave this task 2 GPUs [0, 1]"), many);
        String notIndex = assertThrows(IllegalStateException.class,
                () -> GpuBinding.decide(0, 4, new String[] {"GPU-abc"}, false, 2, false)).getMessage();
        assertTrue(notIndex.contains("not a device index"), notIndex);

        GpuBinding local = GpuBinding.decide(3, 4, null, true, 2, true);
        assertEquals("1", local.address(), "rank 3 mod 2 GPUs");
        assertEquals(GpuBinding.Source.LOCAL_ROUND_ROBIN, local.source());
        assertEquals("2", GpuBinding.decide(2, 4, null, true, 4, false).address());
        String tooMany = assertThrows(IllegalStateException.class,
                () -> GpuBinding.decide(1, 4, null, true, 2, false)).getMessage();
        assertTrue(tooMany.contains("4 tasks and this process sees 2 GPU(s)"), tooMany);
        assertTrue(tooMany.contains("Use at most 2 partitions, or set spark.sparkccl.allowSharedGpu=true"), tooMany);

        assertFalse(GpuBinding.decide(0, 4, null, true, 0, false).hasGpu(), "no CUDA: host memory");
        assertFalse(GpuBinding.decide(0, 4, new String[0], false, 0, false).hasGpu());
    }

    private static TaskPlacement placement(int rank, String executor, long pid, String gpu) {
        GpuBinding binding = gpu == null ? GpuBinding.none() : GpuBinding.decide(rank, 4, new String[] {gpu}, false, 0, false);
        return new TaskPlacement(rank, executor, "host/boot", pid, binding, gpu == null ? "HOST" : "GPU");
    }

    @Test
    void twoRanksOnOneGpuAreRefusedUnlessAllowed() {
        List<TaskPlacement> shared = List.of(placement(0, "1", 100, "0"), placement(1, "1", 100, "1"),
                placement(2, "2", 200, "0"), placement(3, "1", 100, "0"));
        String message = assertThrows(CclException.class, () -> PlacementBootstrap.check(shared, false)).getMessage();
        assertTrue(message.contains("ranks [0, 3] are all on GPU 0 of executor 1"), message);
        assertTrue(message.contains("spark.sparkccl.allowSharedGpu=true"), message);
        PlacementBootstrap.check(shared, true);

        List<TaskPlacement> distinct = List.of(placement(0, "1", 100, "0"), placement(1, "1", 100, "1"),
                placement(2, "2", 200, "0"), placement(3, "2", 200, "1"));
        PlacementBootstrap.check(distinct, false);

        List<TaskPlacement> engines = List.of(placement(0, "1", 100, "0"),
                new TaskPlacement(1, "2", "host/boot", 200, GpuBinding.decide(1, 2, new String[] {"0"}, false, 0, false),
                        "HOST"));
        String engineMessage = assertThrows(CclException.class, () -> PlacementBootstrap.check(engines, false)).getMessage();
        assertTrue(engineMessage.contains("ranks [0] can use CUDA and ranks [1] cannot (rank 1 runs on executor 2)"),
                engineMessage);

        List<TaskPlacement> mixed = List.of(placement(0, "1", 100, "0"), placement(1, "2", 200, null));
        String mixedMessage = assertThrows(CclException.class, () -> PlacementBootstrap.check(mixed, true)).getMessage();
        assertTrue(mixedMessage.contains("ranks [0] have a GPU and ranks [1] have none"), mixedMessage);
    }

    @Test
    void placementsTravelWithTheEnginesBytesInOneRound() throws Exception {
        int size = 3;
        byte[][] board = new byte[size][];
        java.util.concurrent.CyclicBarrier round = new java.util.concurrent.CyclicBarrier(size);
        List<java.util.concurrent.Future<byte[][]>> results = new ArrayList<>();
        List<PlacementBootstrap> bootstraps = new ArrayList<>();
        java.util.concurrent.ExecutorService threads = java.util.concurrent.Executors.newFixedThreadPool(size);
        try {
            for (int r = 0; r < size; r++) {
                int rank = r;
                org.sparkccl.core.Bootstrap threadsOfOneJvm = new org.sparkccl.core.Bootstrap() {
                    @Override public int rank() { return rank; }
                    @Override public int size() { return size; }
                    @Override public byte[][] allGather(byte[] mine) {
                        board[rank] = mine;
                        try {
                            round.await();
                        } catch (Exception e) {
                            throw new IllegalStateException(e);
                        }
                        return board.clone();
                    }
                    @Override public void barrier() { }
                };
                PlacementBootstrap bootstrap = new PlacementBootstrap(threadsOfOneJvm,
                        placement(r, "e" + r, 10 + r, Integer.toString(r)), false);
                bootstraps.add(bootstrap);
                results.add(threads.submit(() -> bootstrap.allGather(new byte[] {(byte) rank, 42})));
            }
            for (int r = 0; r < size; r++) {
                byte[][] payloads = results.get(r).get();
                for (int from = 0; from < size; from++) {
                    assertEquals(2, payloads[from].length, "the engine gets its own bytes back, unwrapped");
                    assertEquals(from, payloads[from][0]);
                }
                assertEquals(size, bootstraps.get(r).placements().size());
                assertEquals("e2", bootstraps.get(r).placements().get(2).executorId());
                assertEquals("2", bootstraps.get(r).placements().get(2).gpu());
                assertEquals("GPU", bootstraps.get(r).placements().get(2).engine());
            }
        } finally {
            threads.shutdownNow();
        }
    }

    @Test
    void damagedOrOtherBuildPlacementMessagesAreRefusedNamingTheRank() {
        String corrupted = placementRefusal(mine -> {
            byte[] flipped = mine.clone();
            flipped[flipped.length - 6] ^= 1;
            return flipped;
        });
        assertTrue(corrupted.startsWith("refused the placement message from rank 0") && corrupted.contains("corrupted"),
                corrupted);
        String older = placementRefusal(mine -> java.nio.ByteBuffer.allocate(8).putInt(0x53435350).putInt(1).array());
        assertTrue(older.contains("version 1") && older.contains("same sparkccl jar"), older);
    }

    /** What a one-rank PlacementBootstrap says when its round hands back {@code damage} of its own message. */
    private static String placementRefusal(java.util.function.UnaryOperator<byte[]> damage) {
        org.sparkccl.core.Bootstrap alone = new org.sparkccl.core.Bootstrap() {
            @Override public int rank() { return 0; }
            @Override public int size() { return 1; }
            @Override public byte[][] allGather(byte[] mine) { return new byte[][] {damage.apply(mine)}; }
            @Override public void barrier() { }
        };
        PlacementBootstrap bootstrap = new PlacementBootstrap(alone, placement(0, "e0", 10, "0"), false);
        return assertThrows(WireFormatException.class, () -> bootstrap.allGather(new byte[] {7})).getMessage();
    }

    @Test
    void cleanupRunsEveryStepAndKeepsTheFirstError() {
        List<String> ran = new ArrayList<>();
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> new CleanupSteps()
                .add("a", () -> ran.add("a"))
                .add("b", () -> {
                    ran.add("b");
                    throw new IllegalStateException("b broke");
                })
                .add("c", () -> ran.add("c"))
                .add("d", () -> {
                    ran.add("d");
                    throw new java.io.IOException("d broke");
                })
                .runAll());
        assertEquals(List.of("a", "b", "c", "d"), ran);
        assertTrue(e.getMessage().contains("'b' failed: b broke"), e.getMessage());
        assertEquals(1, e.getSuppressed().length);
        assertEquals("d broke", e.getSuppressed()[0].getMessage());
    }
}
