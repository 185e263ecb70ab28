package org.sparkccl.spark;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.sparkccl.spark.LocalExecutors.list;
import static org.sparkccl.spark.LocalExecutors.logsContain;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Pattern;
import org.apache.spark.SparkContext;
import org.sparkccl.train.PreparedData;
import org.sparkccl.train.TrainConfig;
import org.sparkccl.train.TrainJob;
import org.sparkccl.train.TrainResult;

/** TrainJob with one executor of a local cluster killed once its first checkpoint is written. */
final class KilledTraining {
    final TrainResult result;
    final long killedAfterStep;

    KilledTraining(TrainResult result, long killedAfterStep) {
        this.result = result;
        this.killedAfterStep = killedAfterStep;
    }

    /**
     * The retried attempt resumed from a checkpoint written at or after the kill, said so in an
     * executor's log, and ended with the weights of an uninterrupted run resumed from (a copy of)
     * that same checkpoint, bit for bit: both start from the same bytes and run the same steps in
     * the same order (rank r always holds the examples with id = r mod n, and the all-reduce adds
     * the ranks in the same order).
     */
    void assertResumedExactly(SparkContext sc, PreparedData data, TrainConfig config, Path copies)
            throws IOException {
        long resumedFrom = result.firstStep();
        System.out.println("executor killed after checkpoint " + killedAfterStep
                + "; the retried attempt resumed from step " + resumedFrom);
        assertTrue(killedAfterStep > 0, "no checkpoint appeared");
        assertTrue(resumedFrom >= killedAfterStep && resumedFrom < config.steps()
                && resumedFrom % config.checkpointEvery() == 0, "the retried attempt started at step " + resumedFrom);
        assertTrue(logsContain(sc, Pattern.compile("stage attempt \\d+: resuming from checkpoint step "
                + resumedFrom + " ")), "no executor logged the resume from step " + resumedFrom);
        String copy = copies.resolve(String.format("checkpoint-%012d.arrow", resumedFrom)).toUri().toString();
        TrainResult uninterrupted = TrainJob.train(data, config.withSteps(config.steps(), copy,
                config.checkpointEvery(), true));
        assertEquals(resumedFrom, uninterrupted.firstStep());
        assertArrayEquals(uninterrupted.weights(), result.weights(),
                "retried attempt = an uninterrupted run resumed from the same checkpoint");
    }

    /**
     * Runs TrainJob with checkpoints in {@code checkpoints}; SIGKILLs executor {@code victim} as soon as
     * the first checkpoint appears, and copies every checkpoint into {@code copies} as it appears (the
     * trainer keeps only the newest 3), so that the test can resume from the one the retry used.
     */
    static KilledTraining trainKillingOne(PreparedData data, TrainConfig config, Path checkpoints, Path copies,
                                          long victim) throws InterruptedException {
        AtomicBoolean training = new AtomicBoolean(true);
        AtomicLong killedAfter = new AtomicLong(-1);
        Thread watcher = new Thread(() -> {
            Set<String> copied = new TreeSet<>();
            while (training.get()) {
                for (Path p : list(checkpoints)) {
                    String name = p.getFileName().toString();
                    if (name.startsWith("checkpoint-") && name.endsWith(".arrow") && copied.add(name)) {
                        try {
                            Path to = copies.resolve(name).resolve(name);
                            Files.createDirectories(to.getParent());
                            Files.copy(p, to, StandardCopyOption.REPLACE_EXISTING);
                        } catch (NoSuchFileException e) {
                            copied.remove(name);
                        } catch (IOException e) {
                            throw new UncheckedIOException(e);
                        }
                        if (killedAfter.get() < 0) {
                            killedAfter.set(Long.parseLong(name.replaceAll("\\D", "")));
                            ProcessHandle.of(victim).ifPresent(ProcessHandle::destroyForcibly);
                        }
                    }
                }
                try {
                    Thread.sleep(2);
                } catch (InterruptedException e) {
                    return;
                }
            }
        }, "checkpoint-watcher");
        watcher.start();
        try {
            return new KilledTraining(TrainJob.train(data, config), killedAfter.get());
        } finally {
            training.set(false);
            watcher.join();
        }
    }
}
