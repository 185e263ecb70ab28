package org.sparkccl.spark;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.apache.spark.SparkConf;

/** Local clusters with GPUs from discovery scripts, for the GPU tests of this module and of train. */
public final class GpuClusters {
    private GpuClusters() {
    }

    /**
     * A local cluster whose workers get {@code workerGpus} GPUs each from {@code workerScript};
     * executors take {@code executorGpus} each, tasks {@code taskGpus}. Executors are launched by Spark's workers
     * from SPARK_HOME with this JVM's class path, and with Spark's JVM options only.
     */
    public static SparkConf gpuCluster(Path dir, String master, Path workerScript, int workerGpus, int executorGpus,
                                        String taskGpus) {
        return SparkTestSupport.clusterConf(master, "sparkccl-gpu")
                .set("spark.worker.resource.gpu.amount", Integer.toString(workerGpus))
                .set("spark.worker.resource.gpu.discoveryScript", workerScript.toString())
                .set("spark.executor.resource.gpu.amount", Integer.toString(executorGpus))
                .set("spark.executor.resource.gpu.discoveryScript", workerScript.toString())
                .set("spark.task.resource.gpu.amount", taskGpus)
                .set("spark.sparkccl.timeoutMs", "60000");
    }

    /** Each worker that runs it claims the next free GPU index (a worker runs its script once, at start). */
    public static Path claimScript(Path dir, int gpus) throws IOException {
        Path claims = dir.resolve("claims");
        Files.createDirectories(claims);
        return script(dir, "claim-gpu.sh", "for i in $(seq 0 " + (gpus - 1) + "); do\n"
                + "  if mkdir '" + claims + "'/$i 2>/dev/null; then echo \"{\\\"name\\\":\\\"gpu\\\",\\\"addresses\\\":[\\\"$i\\\"]}\"; exit 0; fi\n"
                + "done\necho 'no GPU left to claim' >&2; exit 1\n");
    }

    /** Lists GPUs 0..n-1. */
    public static Path listScript(Path dir, int gpus) throws IOException {
        String addresses = IntStream.range(0, gpus).mapToObj(i -> "\\\"" + i + "\\\"").collect(Collectors.joining(","));
        return script(dir, "list-gpus-" + gpus + ".sh", "echo \"{\\\"name\\\":\\\"gpu\\\",\\\"addresses\\\":[" + addresses + "]}\"\n");
    }

    private static Path script(Path dir, String name, String body) throws IOException {
        Path script = dir.resolve(name);
        Files.writeString(script, "#!/bin/sh\n" + body);
        script.toFile().setExecutable(true, true);
        return script;
    }
}
