package org.sparkccl.spark;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.JavaSparkContext;
import org.sparkccl.ipc.cuda.CudaDevice;
import org.sparkccl.ipc.cuda.DeviceBuffer;
import org.sparkccl.ipc.cuda.PinnedHostBuffer;
import org.sparkccl.core.shm.ShmTransport;

/**
 * What sparkccl holds in one executor JVM on GPUs, and the GPU's memory in use (every process), read
 * inside a task: for the GPU tests' checks that a failure leaked nothing.
 */
final class GpuExecutorHoldings implements Serializable {
    final long pid;
    final long deviceBytes;
    final long pinnedBytes;
    final int openCommunicators;
    final long shmBytesMapped;
    final long gpuUsedBytes;

    private GpuExecutorHoldings(long pid, long deviceBytes, long pinnedBytes, int openCommunicators, long shmBytesMapped,
                                long gpuUsedBytes) {
        this.pid = pid;
        this.deviceBytes = deviceBytes;
        this.pinnedBytes = pinnedBytes;
        this.openCommunicators = openCommunicators;
        this.shmBytesMapped = shmBytesMapped;
        this.gpuUsedBytes = gpuUsedBytes;
    }

    /**
     * One barrier task per executor ({@code executors} of them, one core and one GPU each), building no
     * communicator: what each executor holds.
     */
    static List<GpuExecutorHoldings> read(JavaSparkContext jsc, int executors) {
        List<Integer> parts = IntStream.range(0, executors).boxed().collect(Collectors.toList());
        return new ArrayList<>(SparkCclJobs.barrierMapPartitions(jsc.parallelize(parts, executors), rows -> {
            int gpu = Integer.parseInt(TaskContext.get().resourcesJMap().get("gpu").addresses()[0]);
            return List.of(new GpuExecutorHoldings(ProcessHandle.current().pid(), DeviceBuffer.outstandingBytes(),
                    PinnedHostBuffer.outstandingBytes(), SparkCcl.openCount(), ShmTransport.mappedBytesInJvm(),
                    CudaDevice.get(gpu).usedBytes())).iterator();
        }).collect());
    }

    @Override
    public String toString() {
        return String.format(Locale.ROOT, "pid %d: sparkccl device %d B, pinned %d B, %d open communicators, %d B"
                + " of shared memory mapped; GPU memory in use (all processes) %.1f MiB", pid, deviceBytes,
                pinnedBytes, openCommunicators, shmBytesMapped, gpuUsedBytes / 1048576.0);
    }
}
