package org.sparkccl.spark;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.util.TaskCompletionListener;
import org.sparkccl.core.PeerFailedException;

/**
 * What Spark does when the current barrier stage fails, so that a rank's error can say it. Spark
 * retries a failed barrier stage as a whole only when it is a ShuffleMapStage (its output feeds a
 * shuffle), up to {@value #MAX_ATTEMPTS_KEY} attempts (default {@value #DEFAULT_MAX_ATTEMPTS}); a
 * failed barrier ResultStage ({@code barrier().mapPartitions(...).collect()}) aborts the job.
 *
 * <p>How the task knows: {@link SparkCclJobs#retryableBarrierMapPartitions} marks its tasks
 * ({@link #markRetryable}, a flag carried in the task's closure); any other barrier task is
 * classified by the Spark task that runs it (a {@code ShuffleMapTask} or a {@code ResultTask} on
 * the task thread's stack when the communicator is built), and where neither says, the message
 * names both cases.
 */
final class StageRetry {
    static final String MAX_ATTEMPTS_KEY = "spark.stage.maxConsecutiveAttempts";
    static final int DEFAULT_MAX_ATTEMPTS = 4;
    private static final String SHUFFLE_MAP_TASK = "org.apache.spark.scheduler.ShuffleMapTask";
    private static final String RESULT_TASK = "org.apache.spark.scheduler.ResultTask";
    private static final Map<Long, Boolean> MARKED_RETRYABLE = new ConcurrentHashMap<>();

    /** What Spark does with the stage when it fails. */
    enum Kind {
        /** A ShuffleMapStage: Spark retries it as a whole. */
        RETRYABLE,
        /** A ResultStage: Spark aborts the job. */
        RESULT,
        /** Not known (the communicator was built outside a task Spark runs as either). */
        UNKNOWN
    }

    private final Kind kind;
    private final int attempt;
    private final int maxAttempts;

    StageRetry(Kind kind, int attempt, int maxAttempts) {
        this.kind = kind;
        this.attempt = attempt;
        this.maxAttempts = maxAttempts;
    }

    /** Marks the current task as one of a stage built to be retried (its output feeds a shuffle). */
    static void markRetryable(TaskContext context) {
        long id = context.taskAttemptId();
        if (MARKED_RETRYABLE.putIfAbsent(id, Boolean.TRUE) == null) {
            context.addTaskCompletionListener(new TaskCompletionListener() {
                @Override
                public void onTaskCompletion(TaskContext finished) {
                    MARKED_RETRYABLE.remove(id);
                }
            });
        }
    }

    /** The current task's stage, as far as this task can tell; call on the task's thread. */
    static StageRetry of(TaskContext context) {
        Kind kind = MARKED_RETRYABLE.containsKey(context.taskAttemptId()) ? Kind.RETRYABLE : kindFromStack();
        return new StageRetry(kind, context.stageAttemptNumber(), maxAttempts(SparkEnv.get() == null ? null
                : SparkEnv.get().conf()));
    }

    static int maxAttempts(SparkConf conf) {
        return conf == null ? DEFAULT_MAX_ATTEMPTS : conf.getInt(MAX_ATTEMPTS_KEY, DEFAULT_MAX_ATTEMPTS);
    }

    static Kind kindFromStack() {
        return StackWalker.getInstance().walk(frames -> frames
                .map(StackWalker.StackFrame::getClassName)
                .filter(name -> name.equals(SHUFFLE_MAP_TASK) || name.equals(RESULT_TASK))
                .findFirst()
                .map(name -> name.equals(SHUFFLE_MAP_TASK) ? Kind.RETRYABLE : Kind.RESULT)
                .orElse(Kind.UNKNOWN));
    }

    Kind kind() {
        return kind;
    }

    /** 0 for the first attempt of the stage, 1 for its first retry, ... */
    int attempt() {
        return attempt;
    }

    /** What happens next, for the end of a failing rank's message. */
    String consequence() {
        int k = attempt + 1;
        switch (kind) {
            case RETRYABLE:
                if (k < maxAttempts) {
                    return "Spark retries this barrier stage (attempt " + k + " of " + maxAttempts + ", "
                            + MAX_ATTEMPTS_KEY + "): every rank starts again with a new communicator";
                }
                return "this was attempt " + k + " of " + maxAttempts + " of this barrier stage (" + MAX_ATTEMPTS_KEY
                        + "), so Spark does not retry it again: the job fails";
            case RESULT:
                return "this barrier stage is a result stage, which Spark does not retry: the job fails; use"
                        + " SparkCclJobs.retryableBarrierMapPartitions (a barrier stage that feeds a shuffle) to have"
                        + " Spark retry it, up to " + maxAttempts + " attempts (" + MAX_ATTEMPTS_KEY + ")";
            default:
                return "Spark retries a barrier stage only when its output feeds a shuffle (as"
                        + " SparkCclJobs.retryableBarrierMapPartitions builds it), up to " + maxAttempts + " attempts ("
                        + MAX_ATTEMPTS_KEY + "); a barrier result stage (barrier().mapPartitions(...).collect()) is not"
                        + " retried and the job fails";
        }
    }

    /** {@code e} with what Spark does next appended: a dead or failed peer ends this attempt of the stage. */
    PeerFailedException explain(PeerFailedException e) {
        return new PeerFailedException(e.failedRank(), e.getMessage() + "; " + consequence(), e);
    }

    @Override
    public String toString() {
        switch (kind) {
            case RETRYABLE:
                return "Spark retries this stage on failure, up to " + maxAttempts + " attempts";
            case RESULT:
                return "a result stage: Spark does not retry it";
            default:
                return "a stage Spark may or may not retry";
        }
    }
}
