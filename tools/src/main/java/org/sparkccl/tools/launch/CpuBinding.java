package org.sparkccl.tools.launch;

import com.sun.jna.LastErrorException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import org.sparkccl.core.os.LibC;

/**
 * Binds the calling thread to one CPU, as {@code mpirun --bind-to core} binds each rank process
 * (OpenMPI's default for up to 2 ranks). Why a benchmark needs it: on a machine with as many cores
 * as ranks, the Linux scheduler now and then puts two busy-waiting ranks on one core for a while
 * (when the other core was taken by something else for a moment), and every call then costs a
 * time slice; seen on the 2-core CI VM as whole rows of 256 KB calls at 134-141 us instead of
 * 13-19. Only the calling thread is bound: the JVM's own threads (GC, JIT) keep every CPU.
 */
public final class CpuBinding {
    private static final Path STATUS = Paths.get("/proc/self/status");

    private CpuBinding() {
    }

    /** The CPUs this process may run on, in order (Linux: Cpus_allowed_list); empty where unknown. */
    public static List<Integer> allowedCpus() {
        try {
            for (String line : Files.readAllLines(STATUS, StandardCharsets.US_ASCII)) {
                if (line.startsWith("Cpus_allowed_list:")) {
                    return parseCpuList(line.substring(line.indexOf(':') + 1).trim());
                }
            }
        } catch (IOException | RuntimeException e) {
            // Not Linux, or /proc not mounted: nothing to bind to.
        }
        return List.of();
    }

    /** A kernel CPU list such as {@code 0-3,8,10-11}. */
    static List<Integer> parseCpuList(String list) {
        List<Integer> cpus = new ArrayList<>();
        for (String part : list.split(",")) {
            if (part.isBlank()) {
                continue;
            }
            int dash = part.indexOf('-');
            int from = Integer.parseInt((dash < 0 ? part : part.substring(0, dash)).trim());
            int to = dash < 0 ? from : Integer.parseInt(part.substring(dash + 1).trim());
            for (int c = from; c <= to; c++) {
                cpus.add(c);
            }
        }
        return cpus;
    }

    /**
     * Binds the calling thread to {@code cpu}. Returns null when bound, else why not (the thread
     * then runs unbound, as before).
     */
    public static String bindCallingThread(int cpu) {
        if (cpu < 0) {
            throw new IllegalArgumentException("negative CPU " + cpu);
        }
        long[] mask = new long[cpu / 64 + 1];
        mask[cpu / 64] = 1L << (cpu % 64);
        try {
            LibC.sched_setaffinity(0, mask.length * 8L, mask);
            return null;
        } catch (LastErrorException e) {
            return "sched_setaffinity(cpu " + cpu + ") failed with errno " + e.getErrorCode();
        } catch (LinkageError | RuntimeException e) {
            return "cannot call sched_setaffinity: " + e;
        }
    }
}
