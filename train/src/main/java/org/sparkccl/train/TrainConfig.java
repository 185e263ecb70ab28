package org.sparkccl.train;

import java.io.Serializable;
import java.util.Map;

/** Everything a rank needs to train, the same on every rank: sent to the barrier tasks with the closure. */
public final class TrainConfig implements Serializable {
    private static final long serialVersionUID = 1L;

    final ModelSpec model;
    final OptimizerSpec optimizer;
    final int batchSize;
    final long steps;
    final long seed;
    final int logEvery;
    final String checkpointDir;
    final long checkpointEvery;
    final boolean resume;
    final Map<String, String> hadoopSettings;
    final ComputePath.Choice compute;
    /** The Spark stage attempt this rank runs in (0 = the first): a retried attempt resumes from the newest checkpoint. */
    final int stageAttempt;
    /** Whether the ranks end with a pass over the whole training set for its loss and accuracy. */
    final boolean evaluateTrainingSet;

    /**
     * @param batchSize      global minibatch size (all ranks together)
     * @param steps          train until this many steps are done (a resumed run counts the checkpoint's)
     * @param checkpointDir  Hadoop path for checkpoints, or null for none
     * @param hadoopSettings Hadoop configuration entries for the checkpoint file system (spark.hadoop.* without the prefix)
     */
    public TrainConfig(ModelSpec model, OptimizerSpec optimizer, int batchSize, long steps, long seed, int logEvery,
                       String checkpointDir, long checkpointEvery, boolean resume, Map<String, String> hadoopSettings) {
        this(model, optimizer, batchSize, steps, seed, logEvery, checkpointDir, checkpointEvery, resume, hadoopSettings,
                ComputePath.Choice.AUTO, 0, true);
    }

    private TrainConfig(ModelSpec model, OptimizerSpec optimizer, int batchSize, long steps, long seed, int logEvery,
                        String checkpointDir, long checkpointEvery, boolean resume, Map<String, String> hadoopSettings,
                        ComputePath.Choice compute, int stageAttempt, boolean evaluateTrainingSet) {
        if (batchSize < 1 || steps < 0 || logEvery < 1 || checkpointEvery < 1) {
            throw new IllegalArgumentException("batch size, log interval and checkpoint interval must be >= 1 and steps >= 0");
        }
        if (resume && checkpointDir == null) {
            throw new IllegalArgumentException("--resume needs --checkpoint-dir");
        }
        this.model = model;
        this.optimizer = optimizer;
        this.batchSize = batchSize;
        this.steps = steps;
        this.seed = seed;
        this.logEvery = logEvery;
        this.checkpointDir = checkpointDir;
        this.checkpointEvery = checkpointEvery;
        this.resume = resume;
        this.hadoopSettings = Map.copyOf(hadoopSettings);
        this.compute = compute;
        this.stageAttempt = stageAttempt;
        this.evaluateTrainingSet = evaluateTrainingSet;
    }

    public ModelSpec model() {
        return model;
    }

    public long steps() {
        return steps;
    }

    public long checkpointEvery() {
        return checkpointEvery;
    }

    /** The same training with other steps, checkpointing or resume settings. */
    public TrainConfig withSteps(long newSteps, String newCheckpointDir, long newCheckpointEvery, boolean newResume) {
        return new TrainConfig(model, optimizer, batchSize, newSteps, seed, logEvery, newCheckpointDir,
                newCheckpointEvery, newResume, hadoopSettings, compute, stageAttempt, evaluateTrainingSet);
    }

    /** The same training, computed where {@code choice} says (TrainJob's --compute; AUTO by default). */
    public TrainConfig withCompute(ComputePath.Choice choice) {
        return new TrainConfig(model, optimizer, batchSize, steps, seed, logEvery, checkpointDir, checkpointEvery, resume,
                hadoopSettings, choice, stageAttempt, evaluateTrainingSet);
    }

    /**
     * The same training without the final pass over the whole training set (its loss and accuracy
     * are then NaN in the result): for callers that compute them later, if at all, as Spark ML's
     * training summaries do. The pass costs about a third of the steps' time on a few epochs.
     */
    public TrainConfig withoutTrainingSetEvaluation() {
        return new TrainConfig(model, optimizer, batchSize, steps, seed, logEvery, checkpointDir, checkpointEvery, resume,
                hadoopSettings, compute, stageAttempt, false);
    }

    /**
     * The training as attempt {@code attempt} of its Spark stage runs it (0 = the first): a retried
     * attempt resumes from the newest checkpoint where there is a checkpoint directory (the one it
     * started from, or one the failed attempt wrote), else it starts again from step 0.
     */
    public TrainConfig forStageAttempt(int attempt) {
        if (attempt == stageAttempt) {
            return this;
        }
        return new TrainConfig(model, optimizer, batchSize, steps, seed, logEvery, checkpointDir, checkpointEvery,
                resume || (attempt > 0 && checkpointDir != null), hadoopSettings, compute, attempt, evaluateTrainingSet);
    }

    public int stageAttempt() {
        return stageAttempt;
    }

    public ComputePath.Choice compute() {
        return compute;
    }

    @Override
    public String toString() {
        return model + ", " + optimizer + ", batch " + batchSize + ", " + steps + " steps, seed " + seed
                + (checkpointDir == null ? "" : ", checkpoints in " + checkpointDir + " every " + checkpointEvery
                + (resume ? ", resuming" : ""));
    }
}
