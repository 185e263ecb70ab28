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

/**
 * The executor JVMs of a {@code local-cluster} application, for tests that kill one: finding them,
 * reading their logs, and the files
 * through which their ranks report to the test.
 */
public final class LocalExecutors {
    private LocalExecutors() {
    }

    /** This application's executor JVMs (the local-cluster workers run in this JVM and start them as children). */
    public static List<Long> processes(SparkContext sc) {
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
    public static boolean logsContain(SparkContext sc, Pattern pattern) throws IOException {
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


    /** Written under a temporary name and moved into place, so a reader sees all of it or nothing. */
    public static void write(Path file, String text) {
        try {
            Path tmp = file.resolveSibling("." + file.getFileName() + ".tmp");
            Files.writeString(tmp, text, StandardCharsets.UTF_8);
            Files.move(tmp, file, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    public static String read(Path file) {
        try {
            return Files.readString(file, StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    public static List<Path> list(Path dir) {
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
