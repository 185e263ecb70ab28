package org.sparkccl.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.apache.spark.SparkConf;
import org.junit.jupiter.api.Test;
import org.sparkccl.core.PeerFailedException;

/** What a failing rank says Spark does next, for each kind of stage and attempt. */
class StageRetryTest {
    private static final PeerFailedException DIED = new PeerFailedException(2, "rank 1: rank 2 (pid 42) died while"
            + " this rank waited for LL data from rank 2 at step 0; this communicator is unusable: every rank must start"
            + " again with a new one");

    @Test
    void aRetryableStageSaysWhichAttemptFailedOfHowMany() {
        PeerFailedException e = new StageRetry(StageRetry.Kind.RETRYABLE, 0, 4).explain(DIED);
        assertEquals(2, e.failedRank());
        assertTrue(e.getMessage().startsWith(DIED.getMessage() + "; "), e.getMessage());
        assertTrue(e.getMessage().endsWith("; Spark retries this barrier stage (attempt 1 of 4,"
                + " spark.stage.maxConsecutiveAttempts): every rank starts again with a new communicator"), e.getMessage());
        assertEquals(DIED, e.getCause());
    }

    @Test
    void theLastAttemptSaysTheJobFails() {
        String m = new StageRetry(StageRetry.Kind.RETRYABLE, 3, 4).explain(DIED).getMessage();
        assertTrue(m.endsWith("this was attempt 4 of 4 of this barrier stage (spark.stage.maxConsecutiveAttempts),"
                + " so Spark does not retry it again: the job fails"), m);
    }

    @Test
    void aResultStageSaysItIsNotRetriedAndWhatToUse() {
        String m = new StageRetry(StageRetry.Kind.RESULT, 0, 4).explain(DIED).getMessage();
        assertTrue(m.contains("; this barrier stage is a result stage, which Spark does not retry: the job fails; use"
                + " SparkCclJobs.retryableBarrierMapPartitions"), m);
    }

    @Test
    void anUnknownStageNamesBothCases() {
        String m = new StageRetry(StageRetry.Kind.UNKNOWN, 0, 4).explain(DIED).getMessage();
        assertTrue(m.contains("only when its output feeds a shuffle") && m.contains("is not retried and the job fails"), m);
    }

    @Test
    void maxAttemptsComesFromSparksSetting() {
        assertEquals(4, StageRetry.maxAttempts(null));
        assertEquals(4, StageRetry.maxAttempts(new SparkConf(false)));
        assertEquals(7, StageRetry.maxAttempts(new SparkConf(false).set("spark.stage.maxConsecutiveAttempts", "7")));
    }

    @Test
    void outsideATaskTheStageIsUnknown() {
        // No ShuffleMapTask or ResultTask on this thread's stack.
        assertEquals(StageRetry.Kind.UNKNOWN, StageRetry.kindFromStack());
    }
}
