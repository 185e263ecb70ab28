package org.sparkccl.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Path;
import java.util.Set;
import java.util.TreeSet;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.io.TempDir;
import org.sparkccl.core.engine.Engines;

/**
 * {@link BarrierCancelCases} on the GPU engine (scripts/spark-gpu-test.sh runs it on the GPU machine):
 * a local cluster of 3 executor JVMs with one rank each, sharing GPU 0 (CUDA IPC between the
 * executors; the GPU machine has one GPU), the all-reduce on the GPU. After every case the executors
 * hold no communicator, device or pinned memory, mapping or segment, and the GPU's memory in use is
 * back to where it was after a first stage had loaded the kernels in every executor.
 */
@Tag("gpu")
class SparkGpuCancelTest extends BarrierCancelSuite {
    private static final int RANKS = 3;
    /** Elements per rank: above the one-shot threshold, so the ranks wait in the ring kernel. */
    private static final int COUNT = 65_537;
    /** GPU memory in use may differ this much from before (the driver's own allocations move a little). */
    private static final long GPU_MEMORY_SLACK = 64L << 20;
    @TempDir
    static Path scripts;
    private static SparkSession spark;
    private static JavaSparkContext jsc;
    private static BarrierCancelCases cases;
    private static final Set<Long> EXECUTOR_PIDS = new TreeSet<>();
    private static long gpuUsedBefore;

    @BeforeAll
    static void start() throws Exception {
        int gpus = Engines.visibleGpus();
        assumeTrue(gpus > 0, "no usable GPU here: " + Engines.gpuUnavailableReason());
        spark = SparkSession.builder().config(GpuClusters.gpuCluster(scripts, "local-cluster[" + RANKS + ",1,4096]",
                        GpuClusters.listScript(scripts, 1), 1, 1, "1")
                .set("spark.executor.cores", "1")
                .set("spark.sparkccl.allowSharedGpu", "true")
                .set("spark.sparkccl.timeoutMs", "120000")
                .set("spark.speculation", "false")
                .setAppName("sparkccl-gpu-barrier-cancel")).getOrCreate();
        jsc = JavaSparkContext.fromSparkContext(spark.sparkContext());
        cases = new BarrierCancelCases(spark, RANKS, COUNT, "gpu");
        SparkTestSupport.awaitExecutors(spark.sparkContext(), RANKS);
        EXECUTOR_PIDS.addAll(LocalExecutors.processes(spark.sparkContext()));
        assertEquals(RANKS, EXECUTOR_PIDS.size(), "executor JVMs " + EXECUTOR_PIDS);
        cases.theNextStageAllReducesRight(46); // loads the kernels in every executor: the GPU memory baseline
        for (GpuExecutorHoldings h : GpuExecutorHoldings.read(jsc, RANKS)) {
            System.out.println("CANCEL gpu before: " + h);
            gpuUsedBefore = Math.max(gpuUsedBefore, h.gpuUsedBytes);
        }
    }

    @AfterAll
    static void stop() {
        if (spark != null) {
            spark.stop();
        }
    }

    /** After every case: the same executors, holding nothing of sparkccl; the GPU's memory back. */
    @AfterEach
    void executorsHoldNothing() {
        assertEquals(EXECUTOR_PIDS, ExecutorState.assertNothingHeld(cases.ranks()),
                "the stages ran in the executors the cluster started with");
        for (GpuExecutorHoldings h : GpuExecutorHoldings.read(jsc, RANKS)) {
            System.out.println("CANCEL gpu after: " + h);
            assertEquals(0, h.deviceBytes + h.pinnedBytes + h.openCommunicators + h.shmBytesMapped, h.toString());
            assertTrue(h.gpuUsedBytes <= gpuUsedBefore + GPU_MEMORY_SLACK, h + "; before: "
                    + gpuUsedBefore / 1048576.0 + " MiB");
        }
    }

    @Override
    BarrierCancelCases cases() {
        return cases;
    }
}
