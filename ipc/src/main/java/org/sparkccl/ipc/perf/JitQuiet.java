package org.sparkccl.ipc.perf;

import java.lang.management.CompilationMXBean;
import java.lang.management.ManagementFactory;
import java.util.concurrent.TimeUnit;

/**
 * Waits, before a timed loop, until this JVM's JIT compilers have had nothing to compile for a
 * while (JMH's warm-up does the same job by running until the numbers settle). Why: on a machine
 * with as many cores as ranks, a compiler thread that compiles code made hot by the warm-up takes a
 * rank's core for 1-10 ms inside the timed loop, and every other rank waits for it (seen with perf
 * sched: C1 and C2 compiler threads of the rank JVMs running between the calls of 1 KB rows, each
 * row's average 3-15x its median). The ranks sleep here, so the compilers get the cores.
 */
final class JitQuiet {
    private static final long POLL_MS = 25;
    /** Quiet for this long: no compilation time added. */
    private static final long QUIET_MS = 100;
    /** Gives up after this long: a JVM that keeps compiling is timed as it is. */
    private static final long MAX_WAIT_MS = 3000;

    private JitQuiet() {
    }

    /** Returns how long it waited, in ms; negative if it gave up while the JIT was still compiling. */
    static long await() {
        CompilationMXBean jit = ManagementFactory.getCompilationMXBean();
        if (jit == null || !jit.isCompilationTimeMonitoringSupported()) {
            return 0;
        }
        long start = System.nanoTime();
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(MAX_WAIT_MS);
        long last = jit.getTotalCompilationTime();
        long quietSince = System.nanoTime();
        while (System.nanoTime() - deadline < 0) {
            sleep();
            long now = jit.getTotalCompilationTime();
            if (now != last) {
                last = now;
                quietSince = System.nanoTime();
            } else if (System.nanoTime() - quietSince >= TimeUnit.MILLISECONDS.toNanos(QUIET_MS)) {
                return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            }
        }
        return -TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
    }

    private static void sleep() {
        try {
            Thread.sleep(POLL_MS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
