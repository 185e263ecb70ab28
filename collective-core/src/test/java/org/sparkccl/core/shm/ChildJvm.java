package org.sparkccl.core.shm;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/** A child JVM running {@link ShmChild} with this test's class path; its output is read line by line. */
final class ChildJvm implements AutoCloseable {
    private static final String EOF = "\u0000EOF";

    private final Process process;
    private final BlockingQueue<String> lines = new LinkedBlockingQueue<>();
    private final List<String> transcript = new ArrayList<>();

    ChildJvm(String... args) throws IOException {
        List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.add("-Xmx64m");
        command.add("-XX:TieredStopAtLevel=1");
        // No JVM flag at all: sparkccl must work in a JVM started with none (see JdkAccess).
        command.add("-cp");
        command.add(System.getProperty("java.class.path"));
        command.add(ShmChild.class.getName());
        command.addAll(List.of(args));
        process = new ProcessBuilder(command).redirectErrorStream(true).start();
        Thread reader = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(
                    new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
                for (String line = in.readLine(); line != null; line = in.readLine()) {
                    lines.add(line);
                }
            } catch (IOException e) {
                lines.add("(reading the child failed: " + e + ")");
            }
            lines.add(EOF);
        }, "child-output");
        reader.setDaemon(true);
        reader.start();
    }

    long pid() {
        return process.pid();
    }

    /** The rest of the first line that starts with {@code prefix + " "} (or equals it); fails if the child ends first. */
    String await(String prefix) throws InterruptedException {
        while (true) {
            String line = lines.poll(60, TimeUnit.SECONDS);
            if (line == null || line.equals(EOF)) {
                throw new AssertionError("child ended (or went silent) before '" + prefix + "'; its output:\n"
                        + String.join("\n", transcript));
            }
            transcript.add(line);
            if (line.equals(prefix)) {
                return "";
            }
            if (line.startsWith(prefix + " ")) {
                return line.substring(prefix.length() + 1);
            }
        }
    }

    int waitForExit() throws InterruptedException {
        if (!process.waitFor(60, TimeUnit.SECONDS)) {
            process.destroyForcibly();
            throw new AssertionError("child did not exit; its output:\n" + String.join("\n", transcript));
        }
        lines.drainTo(transcript);
        return process.exitValue();
    }

    String transcript() {
        lines.drainTo(transcript);
        return String.join("\n", transcript);
    }

    /** SIGKILL: the child gets no chance to clean up. */
    void kill() throws InterruptedException {
        process.destroyForcibly();
        process.waitFor(60, TimeUnit.SECONDS);
    }

    @Override
    public void close() throws InterruptedException {
        if (process.isAlive()) {
            kill();
        }
    }
}
