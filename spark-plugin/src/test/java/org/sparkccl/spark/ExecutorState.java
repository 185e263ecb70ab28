package org.sparkccl.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.Serializable;
import java.nio.file.Paths;
import java.util.Collections;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Collectors;
import org.apache.spark.api.java.JavaRDD;
import org.sparkccl.core.shm.ShmTransport;

/** What an executor JVM holds of sparkccl, read inside a task: for the checks that a failure leaked nothing. */
final class ExecutorState implements Serializable {
    final long pid;
    final int openCommunicators;
    final long shmBytesMapped;

    private ExecutorState(long pid, int openCommunicators, long shmBytesMapped) {
        this.pid = pid;
        this.openCommunicators = openCommunicators;
        this.shmBytesMapped = shmBytesMapped;
    }

    /**
     * Runs a barrier stage over {@code ranks} (one task per executor slot) that builds no communicator,
     * and asserts that no executor it ran in has a communicator open or shared memory mapped, and that
     * /dev/shm holds no segment of those executors; returns their pids.
     */
    static Set<Long> assertNothingHeld(JavaRDD<Integer> ranks) {
        List<ExecutorState> states = SparkCclJobs.barrierMapPartitions(ranks, part -> Collections.singletonList(
                new ExecutorState(ProcessHandle.current().pid(), SparkCcl.openCount(), ShmTransport.mappedBytesInJvm()))
                .iterator()).collect();
        Set<Long> pids = new TreeSet<>();
        for (ExecutorState s : states) {
            assertEquals(0, s.openCommunicators, "executor pid " + s.pid + " has communicators open");
            assertEquals(0, s.shmBytesMapped, "executor pid " + s.pid + " still maps shared memory");
            pids.add(s.pid);
        }
        assertEquals(List.of(), shmSegmentsOf(pids), "segments of the executors " + pids + " in /dev/shm");
        return pids;
    }

    /** sparkccl segments in /dev/shm created by any of {@code pids} (they are named sparkccl-PID-...). */
    static List<String> shmSegmentsOf(Set<Long> pids) {
        return LocalExecutors.list(Paths.get("/dev/shm")).stream().map(p -> p.getFileName().toString())
                .filter(name -> pids.stream().anyMatch(pid -> name.startsWith("sparkccl-" + pid + "-")))
                .collect(Collectors.toList());
    }
}
