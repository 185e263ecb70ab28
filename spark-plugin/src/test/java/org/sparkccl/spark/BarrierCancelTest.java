package org.sparkccl.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Set;
import java.util.TreeSet;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;

/**
 * {@link BarrierCancelCases} on host memory: a local cluster of 2 executor JVMs x 2 fake GPUs (4 ranks
 * over /dev/shm). Afterwards the executors hold no communicator, no mapping and no segment. One
 * cluster serves the cases (executors take 10-20 s to start here). The GPU version is
 * SparkGpuCancelTest.
 */
class BarrierCancelTest extends BarrierCancelSuite {
    private static final int EXECUTORS = 2;
    private static final int GPUS_PER_EXECUTOR = 2;
    private static final int RANKS = EXECUTORS * GPUS_PER_EXECUTOR;
    /** Elements per rank: above the one-shot threshold, so the ranks wait in the ring. */
    private static final int COUNT = 65_537;
    private static SparkSession spark;
    private static BarrierCancelCases cases;
    private static final Set<Long> EXECUTOR_PIDS = new TreeSet<>();

    @BeforeAll
    static void start() throws InterruptedException {
        spark = SparkSession.builder().config(SparkTestSupport.localClusterConf(EXECUTORS, 2, GPUS_PER_EXECUTOR,
                "sparkccl-barrier-cancel").set("spark.sparkccl.timeoutMs", "120000")
                .set("spark.speculation", "false")).getOrCreate();
        cases = new BarrierCancelCases(spark, RANKS, COUNT, "host");
        SparkTestSupport.awaitExecutors(spark.sparkContext(), EXECUTORS);
        EXECUTOR_PIDS.addAll(LocalExecutors.processes(spark.sparkContext()));
        assertEquals(EXECUTORS, EXECUTOR_PIDS.size(), "executor JVMs " + EXECUTOR_PIDS);
    }

    @AfterAll
    static void stop() {
        if (spark != null) {
            spark.stop();
        }
    }

    /** After every case: the same executors, holding no communicator, mapping or segment. */
    @AfterEach
    void executorsHoldNothing() {
        assertEquals(EXECUTOR_PIDS, ExecutorState.assertNothingHeld(cases.ranks()),
                "the stages ran in the executors the cluster started with");
    }

    @Override
    BarrierCancelCases cases() {
        return cases;
    }
}
