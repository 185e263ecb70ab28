package org.sparkccl.spark;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.apache.spark.SparkContext;
import org.sparkccl.spark.train.PreparedData;
import org.sparkccl.spark.train.TrainConfig;
import org.sparkccl.spark.train.TrainResult;

/**
 * The executor JVMs of a {@code local-cluster} application, for tests that kill one: finding them,
 * reading their logs, killing one mid-training once its first checkpoint is written, and the files
 * through which their ranks report to the test.
 */
final class LocalExecutors {
    private LocalExecutors() {
    }

    /** This application's executor JVMs (the local-cluster workers run in this JVM and start them as children). */
    static List<Long> processes(SparkContext sc) {
        String app = sc.applicationId();
        // ProcessHandle.Info gives no command line this long (the class path): read /proc instead.
        return ProcessHandle.current().descendants()
                .filter(ProcessHandle::isAlive)
                .map(ProcessHandle::pid)
                .filter(pid -> {
                    try {
                        String c = new String(Files.readAllBytes(Paths.get("/proc", Long.toString(pid), "cmdline")),
                                StandardCharsets.UTF_8);
                        return c.contains("CoarseGrainedExecutorBackend") && c.contains(app);
                    } catch (IOException e) {
                        return false; // gone
                    }
                })
                .sorted()
                .collect(Collectors.toList());
    }

    /** Whether a line of this application's executor logs (stdout: sparkccl logs there in tests) matches. */
    static boolean logsContain(SparkContext sc, Pattern pattern) throws IOException {
        Path appDir = Paths.get(System.getenv("SPARK_HOME"), "work", sc.applicationId());
        try (Stream<Path> files = Files.walk(appDir)) {
            for (Path p : files.filter(f -> f.getFileName().toString().equals("stdout")).collect(Collectors.toList())) {
                Matcher m = pattern.matcher(Files.readString(p, StandardCharsets.UTF_8));
                if (m.find()) {
                    return true;
                }
            }
        }
        return false;
    }

    /** What {@link #trainKillingOne} did: the retried training's result and the step after which it killed. */
    static final class KilledTraining {
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

    /** Written under a temporary name and moved into place, so a reader sees all of it or nothing. */
    static void write(Path file, String text) {
        try {
            Path tmp = file.resolveSibling("." + file.getFileName() + ".tmp");
            Files.writeString(tmp, text, StandardCharsets.UTF_8);
            Files.move(tmp, file, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static String read(Path file) {
        try {
            return Files.readString(file, StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static List<Path> list(Path dir) {
        if (!Files.isDirectory(dir)) {
            return List.of();
        }
        try (Stream<Path> files = Files.list(dir)) {
            return files.collect(Collectors.toList());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
