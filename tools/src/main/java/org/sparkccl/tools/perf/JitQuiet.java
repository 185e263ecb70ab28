package org.sparkccl.tools.perf;

import java.io.IOException;
import java.lang.management.CompilationMXBean;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.concurrent.TimeUnit;

/**
 * Waits, before a timed loop, until this JVM's JIT compilers have been idle for a while (JMH's
 * warm-up does the same job by running until the numbers settle). Why: on a machine with as many
 * cores as ranks, a compiler thread that compiles code made hot by the warm-up takes a rank's core
 * for 1-10 ms inside the timed loop, and every other rank waits for it (seen with perf sched: C1
 * and C2 compiler threads of the rank JVMs running between the calls of 1 KB rows, each row's
 * average 3-15x its median). The ranks sleep here, so the compilers get the cores.
 *
 * <p>What "idle" means: on Linux, the compiler threads ({@code /proc/self/task/*}, named "C1/C2
 * CompilerThread") used no CPU time (their schedstat) during the quiet period. The JVM's own
 * counter of compilation time is the fallback elsewhere; it grows only when a compilation ends, so
 * one long C2 compilation looks quiet to it (seen: C2 threads running inside rows that it had
 * called quiet).
 */
final class JitQuiet {
    private static final long POLL_MS = 25;
    /** Quiet for this long: no compiler CPU time added. */
    private static final long QUIET_MS = 100;
    /** Gives up after this long: a JVM that keeps compiling is timed as it is. */
    private static final long MAX_WAIT_MS = 5000;
    private static final Path TASKS = Paths.get("/proc/self/task");

    private JitQuiet() {
    }

    /** Returns how long it waited, in ms; negative if it gave up while the JIT was still compiling. */
    static long await() {
        CompilationMXBean jit = ManagementFactory.getCompilationMXBean();
        long compilerNanos = compilerCpuNanos();
        boolean proc = compilerNanos >= 0;
        if (!proc && (jit == null || !jit.isCompilationTimeMonitoringSupported())) {
            return 0;
        }
        long start = System.nanoTime();
        long deadline = start + TimeUnit.MILLISECONDS.toNanos(MAX_WAIT_MS);
        long last = proc ? compilerNanos : jit.getTotalCompilationTime();
        long quietSince = System.nanoTime();
        while (System.nanoTime() - deadline < 0) {
            sleep();
            long now = proc ? compilerCpuNanos() : jit.getTotalCompilationTime();
            if (now != last) {
                last = now;
                quietSince = System.nanoTime();
            } else if (System.nanoTime() - quietSince >= TimeUnit.MILLISECONDS.toNanos(QUIET_MS)) {
                return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            }
        }
        return -TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
    }

    /** CPU time of this JVM's compiler threads so far, in ns; -1 where /proc cannot tell. */
    static long compilerCpuNanos() {
        long total = 0;
        boolean found = false;
        try (DirectoryStream<Path> tasks = Files.newDirectoryStream(TASKS)) {
            for (Path task : tasks) {
                try {
                    String name = new String(Files.readAllBytes(task.resolve("comm")), StandardCharsets.US_ASCII);
                    if (!name.contains("CompilerThre")) {
                        continue;
                    }
                    String stat = new String(Files.readAllBytes(task.resolve("schedstat")), StandardCharsets.US_ASCII);
                    total += Long.parseLong(stat.substring(0, stat.indexOf(' ')));
                    found = true;
                } catch (IOException | RuntimeException e) {
                    // The thread ended between the listing and the read, or the format is not
                    // schedstat's: it adds nothing.
                }
            }
        } catch (IOException | RuntimeException e) {
            return -1;
        }
        return found ? total : -1;
    }

    private static void sleep() {
        try {
            Thread.sleep(POLL_MS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
