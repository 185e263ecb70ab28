package org.sparkccl.spark;

import org.sparkccl.train.TrainJob;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.spark.launcher.JavaModuleOptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.sparkccl.tools.launch.LaunchResult;
import org.sparkccl.tools.launch.RankLauncher;
import org.sparkccl.core.engine.Engines;

/**
 * sparkccl in JVMs started as Spark starts its executors and drivers: with Spark's own JVM options
 * ({@link JavaModuleOptions}) and no flag of ours. Once every Spark executor on GPUs failed because
 * Agrona needed {@code --add-exports=java.base/jdk.internal.misc=ALL-UNNAMED}, which only our test
 * scripts gave. Each path runs first thing in a fresh JVM ({@link JvmFlagsChild}), so no earlier
 * test in the same JVM can have prepared it. The GPU path ({@code gpu} tag) runs on the GPU machine
 * (scripts/spark-gpu-test.sh), as do Spark executors on GPUs ({@link SparkGpuTest}).
 */
class JvmFlagsTest {
    private static final List<String> SPARK_OPTIONS =
            Arrays.asList(JavaModuleOptions.defaultModuleOptions().trim().split("\\s+"));

    @Test
    void scriptsUseSparksOwnOptions() throws IOException {
        Path file = Paths.get("..", "scripts", "spark-jvm-options");
        assertEquals(SPARK_OPTIONS, Files.readAllLines(file).stream().filter(l -> !l.isBlank()).toList(),
                file + " must hold exactly Spark's JavaModuleOptions (the GPU scripts and bin/train use it)");
        assertTrue(SPARK_OPTIONS.stream().noneMatch(o -> o.contains("jdk.internal.misc")));
    }

    @Test
    void executorPluginStartsWithSparksOptions() throws Exception {
        runOne(SPARK_OPTIONS, JvmFlagsChild.class.getName(), List.of("executor-plugin"), "OK executor-plugin", 60);
    }

    @Test
    void hostCommunicatorWithSparksOptions() {
        launch(SPARK_OPTIONS, "host");
    }

    @Test
    void hostCommunicatorWithNoOptionsAtAll() {
        launch(List.of(), "host"); // only what allreduce-perf's launcher gives its ranks (two opens)
    }

    @Test
    void arrowGradientBuffersWithSparksOptions() {
        launch(SPARK_OPTIONS, "arrow");
    }

    /** The GPU engine and a pinned GradientBuffer, two ranks as processes (on the GPU machine). */
    @Test
    @Tag("gpu")
    void gpuCommunicatorWithSparksOptions() {
        assumeTrue(Engines.visibleGpus() > 0, "no usable GPU: " + Engines.gpuUnavailableReason());
        launch(SPARK_OPTIONS, "gpu");
    }

    /** TrainJob as bin/train runs it: an embedded Spark whose tasks are the ranks, in one JVM. */
    @Test
    void trainJobWithSparksOptions() throws Exception {
        String out = runOne(SPARK_OPTIONS, TrainJob.class.getName(),
                List.of("--ranks", "2", "--steps", "40", "--log-every", "40"), "trained steps", 180);
        Matcher m = Pattern.compile("whole training set: loss ([0-9.]+), accuracy ([0-9.]+)").matcher(out);
        assertTrue(m.find(), out);
        double loss = Double.parseDouble(m.group(1));
        assertTrue(loss < Math.log(10) * 0.8, "loss " + loss + " did not fall below 80% of ln(10):\n" + out);
    }

    private static void launch(List<String> options, String path) {
        ByteArrayOutputStream transcript = new ByteArrayOutputStream();
        PrintStream sink = new PrintStream(transcript, true, StandardCharsets.UTF_8);
        LaunchResult result = RankLauncher.of(2, JvmFlagsChild.class.getName())
                .jvmOptions(options.toArray(new String[0]))
                .classPath(SparkTestSupport.absoluteTestClassPath())
                .args(path)
                .env("SPARKCCL_TIMEOUT_MS", "30000")
                .output(sink, sink)
                .timeout(Duration.ofSeconds(120))
                .run();
        String text = transcript.toString(StandardCharsets.UTF_8);
        assertTrue(result.succeeded(), "path " + path + " failed: " + result.failure() + "\n" + text);
        assertEquals(2, text.split("OK " + path, -1).length - 1, "both ranks should report OK:\n" + text);
    }

    private static String runOne(List<String> options, String mainClass, List<String> args, String expect,
                                 int seconds) throws IOException, InterruptedException {
        List<String> command = new ArrayList<>();
        command.add(Paths.get(System.getProperty("java.home"), "bin", "java").toString());
        command.addAll(options);
        command.add("-cp");
        command.add(SparkTestSupport.absoluteTestClassPath());
        command.add(mainClass);
        command.addAll(args);
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true);
        builder.environment().put("SPARK_LOCAL_IP", "127.0.0.1");
        Path log = Files.createTempFile("sparkccl-jvmflags", ".log");
        builder.redirectOutput(log.toFile());
        Process p = builder.start();
        try {
            boolean ended = p.waitFor(seconds, TimeUnit.SECONDS);
            String out = Files.readString(log);
            assertTrue(ended, mainClass + " did not end within " + seconds + " s:\n" + out);
            assertEquals(0, p.exitValue(), mainClass + " failed:\n" + out);
            assertTrue(out.contains(expect), "no '" + expect + "' in:\n" + out);
            return out;
        } finally {
            p.destroyForcibly();
            Files.deleteIfExists(log);
        }
    }
}
