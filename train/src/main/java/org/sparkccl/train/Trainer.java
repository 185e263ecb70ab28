package org.sparkccl.train;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.sparkccl.arrow.Checkpoint;
import org.sparkccl.arrow.ElementType;
import org.sparkccl.arrow.GradientBuffer;
import org.sparkccl.core.memory.HostMemorySources;
import org.sparkccl.arrow.TensorLayout;

/**
 * Data-parallel minibatch training of one rank. Every step each rank adds up the loss gradient
 * over its part of the global minibatch, one in-place all-reduce sums those (with the loss and row
 * count riding along in the same buffer), and every rank applies the same update to its own copy of
 * the weights, so the copies stay equal without ever being sent. A {@link StepEngine} runs the
 * steps: on the CPU, or on the rank's GPU with everything in device memory ({@link ComputePath}).
 * Rank 0 writes checkpoints; on resume (asked for, or a retried Spark stage attempt: {@link
 * TrainConfig#forStageAttempt}) it reads the newest and broadcasts it.
 */
public final class Trainer {
    private static final Logger LOG = LoggerFactory.getLogger(Trainer.class);
    static final String META_MODEL = "model";
    static final String META_OPTIMIZER = "optimizer";
    static final String META_SEED = "seed";
    static final String META_BATCH = "batch";
    private static final int KEEP_CHECKPOINTS = 3;

    private final TrainConfig config;
    private final Model model;
    private final Optimizer optimizer;
    private final Shard shard;
    private final BatchSchedule schedule;

    public Trainer(TrainConfig config, Shard shard, int totalRows) {
        this.config = config;
        this.model = config.model.create();
        this.optimizer = config.optimizer.create();
        this.shard = shard;
        this.schedule = new BatchSchedule(totalRows, config.batchSize, config.seed);
        if (shard.data().cols() != config.model.inputs()) {
            throw new IllegalArgumentException("the data has " + shard.data().cols() + " features, the model "
                    + config.model + " expects " + config.model.inputs());
        }
    }

    /** Trains on the CPU (the single-process reference, and ranks without a GPU). */
    public TrainResult run(StepCollectives collectives, BufferAllocator allocator) {
        return run(collectives, allocator, HostStepEngine.FACTORY);
    }

    /** Trains with the steps run by the engines {@code engines} opens (see {@link ComputePath}). */
    public TrainResult run(StepCollectives collectives, BufferAllocator allocator, StepEngine.Factory engines) {
        TensorLayout layout = model.layout();
        int params = (int) layout.elementCount();
        String[] slotNames = optimizer.slotNames();
        // The engine is opened before the first collective and closed after the last (evaluate's):
        // a GPU engine frees device memory, which must not happen while a peer on the same GPU waits.
        try (GradientBuffer weightsBuffer = GradientBuffer.allocate(allocator, "weights", layout, ElementType.FLOAT32,
                HostMemorySources.preferred());
             OptimizerState state = OptimizerState.like(weightsBuffer, slotNames);
             StepEngine engine = engines.open(config, shard, schedule.batchSize(), collectives, allocator)) {
            LOG.info("rank {}: training steps run {}", collectives.rank(), engine.describe());
            float[] weights = new float[params];
            float[][] slots = new float[slotNames.length][params];
            long firstStep = start(collectives, allocator, weightsBuffer, state, weights, slots);
            engine.load(weights, slots);

            int[] batchIds = new int[schedule.batchSize()];
            int[] localRows = new int[schedule.batchSize()];
            double[] losses = new double[(int) Math.max(0, config.steps - firstStep)];
            long started = System.nanoTime();
            long windowStart = started;
            for (long step = firstStep; step < config.steps; step++) {
                schedule.batch(step, batchIds);
                int mine = shard.localRows(batchIds, batchIds.length, localRows);
                double lossSum = engine.step(localRows, mine, batchIds.length, step + 1);
                losses[(int) (step - firstStep)] = (float) lossSum / (float) batchIds.length;

                long done = step + 1;
                if (collectives.rank() == 0 && (done % config.logEvery == 0 || done == config.steps)) {
                    long now = System.nanoTime();
                    long stepsInWindow = done % config.logEvery == 0 ? config.logEvery : done % config.logEvery;
                    LOG.info(String.format(Locale.ROOT, "step %d/%d  loss %.5f  samples/s %.0f", done, config.steps,
                            losses[(int) (step - firstStep)], stepsInWindow * (double) batchIds.length * 1e9
                                    / Math.max(1, now - windowStart)));
                    windowStart = now;
                }
                if (config.checkpointDir != null && (done % config.checkpointEvery == 0 || done == config.steps)) {
                    if (collectives.rank() == 0) {
                        engine.store(weights, slots);
                    }
                    checkpoint(collectives.rank(), done, weights, slots, weightsBuffer, state);
                }
            }
            double seconds = (System.nanoTime() - started) / 1e9;
            double samplesPerSecond = losses.length == 0 ? 0 : losses.length * (double) schedule.batchSize() / seconds;
            engine.store(weights, null);
            double[] evaluation = config.evaluateTrainingSet ? evaluate(collectives, allocator, weights)
                    : new double[] {Double.NaN, Double.NaN, 1};
            if (collectives.rank() == 0 && config.evaluateTrainingSet) {
                LOG.info(String.format(Locale.ROOT, "done: %d steps, %.0f samples/s; on all %d examples loss %.5f,"
                        + " accuracy %.4f", losses.length, samplesPerSecond, (long) evaluation[2],
                        evaluation[0] / evaluation[2], evaluation[1] / evaluation[2]));
            } else if (collectives.rank() == 0) {
                LOG.info(String.format(Locale.ROOT, "done: %d steps, %.0f samples/s", losses.length, samplesPerSecond));
            }
            return new TrainResult(collectives.rank(), firstStep, losses, weights, samplesPerSecond,
                    evaluation[0] / evaluation[2], evaluation[1] / evaluation[2]);
        }
    }

    /** Loss sum, correct count and row count over every rank's whole shard. */
    private double[] evaluate(StepCollectives collectives, BufferAllocator allocator, float[] weights) {
        int rows = shard.data().rows();
        int[] all = new int[rows];
        for (int i = 0; i < rows; i++) {
            all[i] = i;
        }
        long[] correct = new long[1];
        double loss = model.evaluate(weights, shard.data(), all, rows, correct);
        try (GradientBuffer totals = GradientBuffer.allocate(allocator, "evaluation", TensorLayout.flat("totals", 3),
                ElementType.FLOAT64, HostMemorySources.preferred())) {
            totals.copyFrom(new double[] {loss, correct[0], rows});
            collectives.allReduceSum(totals);
            return totals.toDoubleArray();
        }
    }

    /** Sets the starting weights and optimizer state on every rank; returns the step to start at. */
    private long start(StepCollectives collectives, BufferAllocator allocator, GradientBuffer weightsBuffer,
                       OptimizerState state, float[] weights, float[][] slots) {
        long firstStep = 0;
        if (config.resume) {
            firstStep = resumeStep(collectives, allocator, weightsBuffer, state);
        } else if (config.stageAttempt > 0 && collectives.rank() == 0) {
            LOG.info("stage attempt {}: no checkpoint directory, so training starts again from step 0", config.stageAttempt);
        }
        if (firstStep == 0) {
            model.initialize(weights, config.seed);
            weightsBuffer.copyFrom(weights);
        }
        // Rank 0's weights (and state) everywhere, whatever each rank computed or read.
        collectives.broadcastFromRank0(weightsBuffer);
        weightsBuffer.copyTo(0, weights, 0, weights.length);
        if (firstStep > 0) {
            String[] names = optimizer.slotNames();
            for (int s = 0; s < names.length; s++) {
                GradientBuffer slot = state.slot(names[s]);
                collectives.broadcastFromRank0(slot);
                slot.copyTo(0, slots[s], 0, slots[s].length);
            }
        }
        if (collectives.rank() == 0) {
            LOG.info("training {} on {} rank(s), starting at step {}", config, collectives.size(), firstStep);
        }
        return firstStep;
    }

    /**
     * Rank 0 reads the newest checkpoint and tells every rank its step (0 when there is none, -1 when
     * it failed, so that no rank is left waiting on a broadcast that will not come).
     */
    private long resumeStep(StepCollectives collectives, BufferAllocator allocator, GradientBuffer weightsBuffer,
                            OptimizerState state) {
        long step = 0;
        RuntimeException failure = null;
        if (collectives.rank() == 0) {
            try {
                Optional<Checkpoint> found = Checkpoint.readLatest(new Path(config.checkpointDir), hadoopConf(), allocator);
                if (found.isPresent()) {
                    try (Checkpoint checkpoint = found.get()) {
                        checkCompatible(checkpoint);
                        checkpoint.copyInto(weightsBuffer, state.slots());
                        step = checkpoint.step();
                        if (config.stageAttempt > 0) {
                            LOG.info("stage attempt {}: resuming from checkpoint step {} ({})", config.stageAttempt, step,
                                    checkpoint.path());
                        } else {
                            LOG.info("resuming from {} (step {})", checkpoint.path(), step);
                        }
                    }
                } else if (config.stageAttempt > 0) {
                    LOG.info("stage attempt {}: no checkpoint in {} yet: starting again from step 0", config.stageAttempt,
                            config.checkpointDir);
                } else {
                    LOG.info("no checkpoint in {}: starting from step 0", config.checkpointDir);
                }
            } catch (IOException | RuntimeException e) {
                failure = new IllegalStateException("rank 0 could not resume from " + config.checkpointDir + ": " + e.getMessage(), e);
                step = -1;
            }
        }
        try (GradientBuffer control = GradientBuffer.allocate(allocator, "resume_step", TensorLayout.flat("step", 1),
                ElementType.FLOAT64, HostMemorySources.preferred())) {
            control.setDouble(0, step);
            collectives.broadcastFromRank0(control);
            step = (long) control.getDouble(0);
        }
        if (failure != null) {
            throw failure;
        }
        if (step < 0) {
            throw new IllegalStateException("rank " + collectives.rank() + ": rank 0 could not read the checkpoint in "
                    + config.checkpointDir + " (its log says why)");
        }
        return step;
    }

    private void checkCompatible(Checkpoint checkpoint) {
        Map<String, String> meta = checkpoint.metadata();
        String model = meta.get(META_MODEL);
        String optimizerName = meta.get(META_OPTIMIZER);
        if (!config.model.toString().equals(model) || !config.optimizer.toString().equals(optimizerName)) {
            throw new IllegalArgumentException("checkpoint " + checkpoint.path() + " was written by " + model + " with "
                    + optimizerName + ", this run trains " + config.model + " with " + config.optimizer
                    + "; use another --checkpoint-dir or the same model and optimizer");
        }
    }

    private void checkpoint(int rank, long step, float[] weights, float[][] slots, GradientBuffer weightsBuffer,
                            OptimizerState state) {
        if (rank != 0) {
            return; // every rank holds the same weights
        }
        weightsBuffer.copyFrom(weights);
        String[] names = optimizer.slotNames();
        for (int s = 0; s < names.length; s++) {
            state.slot(names[s]).copyFrom(slots[s]);
        }
        Map<String, String> meta = new LinkedHashMap<>();
        meta.put(META_MODEL, config.model.toString());
        meta.put(META_OPTIMIZER, config.optimizer.toString());
        meta.put(META_SEED, Long.toString(config.seed));
        meta.put(META_BATCH, Integer.toString(config.batchSize));
        try {
            Path dir = new Path(config.checkpointDir);
            Configuration conf = hadoopConf();
            Path written = Checkpoint.write(dir, conf, step, weightsBuffer, state.slots(), meta);
            Checkpoint.prune(dir, conf, KEEP_CHECKPOINTS);
            LOG.info("checkpoint {} written", written);
        } catch (IOException e) {
            throw new UncheckedIOException("rank 0 could not write the checkpoint of step " + step + " to "
                    + config.checkpointDir, e);
        }
    }

    private Configuration hadoopConf() {
        Configuration conf = new Configuration();
        config.hadoopSettings.forEach(conf::set);
        return conf;
    }
}
