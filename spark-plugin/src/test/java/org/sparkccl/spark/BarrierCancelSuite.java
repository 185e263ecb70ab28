package org.sparkccl.spark;

import java.nio.file.Path;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.io.TempDir;

/**
 * The cases of {@link BarrierCancelCases} as tests, in order, on a cluster that a subclass starts and
 * checks after every case (BarrierCancelTest: host memory; SparkGpuCancelTest: GPUs).
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
abstract class BarrierCancelSuite {
    /** The rank whose task {@code killTaskAttempt} kills while it waits in the all-reduce. */
    static final int VICTIM = 2;

    /** The cases, on the subclass's cluster. */
    abstract BarrierCancelCases cases();

    @Test
    @Order(1)
    void cancellingTheJobGroupFreesEveryTaskWithinFiveSeconds(@TempDir Path dir) throws Exception {
        cases().cancellingTheJobGroupFreesEveryTask(dir);
    }

    @Test
    @Order(2)
    void aTaskKilledInTheAllReduceMakesItsPeersFailNamingIt(@TempDir Path dir) throws Exception {
        cases().aTaskKilledInTheAllReduceIsNamedByItsPeers(dir, VICTIM);
    }

    @Test
    @Order(3)
    void aTaskKilledOutsideTheAllReduceMakesItsPeersFailNamingIt(@TempDir Path dir) throws Exception {
        cases().aTaskKilledOutsideTheAllReduceIsNamedByItsPeers(dir);
    }

    @Test
    @Order(4)
    void theNextStageOnTheSameExecutorsAllReducesRight() {
        cases().theNextStageAllReducesRight(47);
    }
}
