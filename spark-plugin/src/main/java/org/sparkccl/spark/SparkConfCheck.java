package org.sparkccl.spark;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.apache.spark.SparkConf;
import org.sparkccl.core.param.Params;

/**
 * Configuration mistakes that Spark would not report, or would report only after a long wait, found
 * on the driver before any task runs. Each problem is one sentence saying what is wrong and which
 * setting to change.
 */
public final class SparkConfCheck {
    static final String TASK_GPU_AMOUNT = "spark.task.resource.gpu.amount";
    static final String EXECUTOR_GPU_AMOUNT = "spark.executor.resource.gpu.amount";

    private SparkConfCheck() {
    }

    /** Throws {@link IllegalArgumentException} listing every problem found, or returns the resolved parameters. */
    public static Params validate(SparkConf conf) {
        List<String> problems = new ArrayList<>();
        Params params = null;
        try {
            params = SparkCclSettings.resolve(conf);
        } catch (IllegalArgumentException e) {
            problems.add(e.getMessage());
        }
        String master = conf.get("spark.master", "");
        String taskGpus = conf.get(TASK_GPU_AMOUNT, null);
        if (taskGpus != null && isLocalMaster(master)) {
            problems.add(TASK_GPU_AMOUNT + "=" + taskGpus + " is set with master " + master + ": Spark's local mode"
                    + " gives tasks no GPU resources and would wait forever for one. Remove " + TASK_GPU_AMOUNT
                    + " (and spark.executor.resource.gpu.*): in local mode sparkccl gives rank r the GPU r mod the"
                    + " number of visible GPUs. To have Spark schedule GPUs, run on a cluster manager (standalone,"
                    + " YARN, Kubernetes) or local-cluster.");
        } else if (taskGpus != null) {
            double amount = parseAmount(taskGpus, problems);
            boolean sharingAllowed = params != null && params.get(SparkCclSettings.ALLOW_SHARED_GPU);
            if (amount > 1) {
                problems.add(TASK_GPU_AMOUNT + "=" + taskGpus + ": a sparkccl rank drives exactly one GPU; set "
                        + TASK_GPU_AMOUNT + "=1 and run one barrier task per GPU.");
            } else if (amount > 0 && amount < 1 && !sharingAllowed) {
                problems.add(TASK_GPU_AMOUNT + "=" + taskGpus + " puts " + (int) Math.round(1 / amount)
                        + " tasks on one GPU, and sparkccl runs one rank per GPU: set " + TASK_GPU_AMOUNT
                        + "=1, or set " + SparkCclSettings.ALLOW_SHARED_GPU.sparkConfKey()
                        + "=true to let ranks share a GPU.");
            }
        }
        if (!problems.isEmpty()) {
            throw new IllegalArgumentException("sparkccl cannot run with this Spark configuration:\n  - "
                    + String.join("\n  - ", problems));
        }
        return params;
    }

    /**
     * Checks, before a barrier stage of {@code tasks} tasks is submitted, what can be known on the
     * driver: the configuration as in {@link #validate}, and that the configured executors have a GPU
     * for every task. Spark would otherwise retry its own slot check for minutes and then fail
     * without naming a GPU setting.
     */
    public static void checkBarrierStage(SparkConf conf, int tasks) {
        Params params = validate(conf);
        String master = conf.get("spark.master", "");
        String taskGpus = conf.get(TASK_GPU_AMOUNT, null);
        String executorGpus = conf.get(EXECUTOR_GPU_AMOUNT, null);
        if (taskGpus == null || executorGpus == null || isLocalMaster(master)
                || conf.getBoolean("spark.dynamicAllocation.enabled", false)
                || params.get(SparkCclSettings.ALLOW_SHARED_GPU)) {
            return;
        }
        int executors = configuredExecutors(conf, master);
        int perExecutor = (int) Math.floor(Double.parseDouble(executorGpus.trim()) / Double.parseDouble(taskGpus.trim()) + 1e-9);
        if (executors > 0 && tasks > executors * perExecutor) {
            throw new IllegalArgumentException("sparkccl: the barrier stage has " + tasks + " tasks, one per GPU, but the"
                    + " cluster is configured with " + executors * perExecutor + " GPU slots (" + executors + " executors x "
                    + EXECUTOR_GPU_AMOUNT + "=" + executorGpus + " / " + TASK_GPU_AMOUNT + "=" + taskGpus + "): use at most "
                    + executors * perExecutor + " partitions (repartition), or raise spark.executor.instances or "
                    + EXECUTOR_GPU_AMOUNT + ".");
        }
    }

    /** Executors the configuration asks for: spark.executor.instances, or N of local-cluster[N,C,M]; -1 when unknown. */
    static int configuredExecutors(SparkConf conf, String master) {
        String m = master.trim();
        if (m.startsWith("local-cluster[")) {
            return Integer.parseInt(m.substring("local-cluster[".length(), m.indexOf(',')).trim());
        }
        String instances = conf.get("spark.executor.instances", null);
        return instances == null ? -1 : Integer.parseInt(instances.trim());
    }

    /** local, local[4], local[*], local[4,2]: one JVM that Spark gives no resources to. Not local-cluster. */
    public static boolean isLocalMaster(String master) {
        String m = master.trim().toLowerCase(Locale.ROOT);
        return m.equals("local") || m.startsWith("local[");
    }

    private static double parseAmount(String text, List<String> problems) {
        try {
            return Double.parseDouble(text.trim());
        } catch (NumberFormatException e) {
            problems.add(TASK_GPU_AMOUNT + "=" + text + " is not a number.");
            return 0;
        }
    }
}
