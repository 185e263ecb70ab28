package org.sparkccl.spark;

import java.util.Map;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.PluginContext;
import org.apache.spark.resource.ResourceInformation;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.sparkccl.core.engine.Engines;

/**
 * Executor half of the plugin: keeps the driver's sparkccl settings for this JVM's tasks, prepares
 * CUDA once when the executor has GPUs, registers sparkccl's metrics in Spark's metrics system, and
 * at shutdown closes what tasks left open.
 */
final class SparkCclExecutorPlugin implements ExecutorPlugin {
    private static final Logger LOG = LoggerFactory.getLogger(SparkCclExecutorPlugin.class);
    private static volatile Map<String, String> settingsFromDriver;

    /** The {@code spark.sparkccl.*} settings the driver passed, or null when the plugin is not running here. */
    static Map<String, String> settingsFromDriver() {
        return settingsFromDriver;
    }

    @Override
    public void init(PluginContext ctx, Map<String, String> extraConf) {
        settingsFromDriver = Map.copyOf(extraConf);
        CclMetrics.registerIn(ctx.metricRegistry());
        ResourceInformation gpus = ctx.resources().get("gpu");
        if (gpus != null && gpus.addresses().length > 0) {
            // Loads the driver binding and initialises CUDA once, here rather than in the first task.
            String reason = Engines.gpuUnavailableReason();
            if (reason == null) {
                LOG.info("sparkccl: executor {} prepared CUDA ({} visible GPUs) for its GPUs {}", ctx.executorID(),
                        Engines.visibleGpus(), String.join(",", gpus.addresses()));
            } else {
                LOG.warn("sparkccl: executor {} was given GPUs {} but cannot use them ({}); ranks will work in host memory",
                        ctx.executorID(), String.join(",", gpus.addresses()), reason);
            }
        }
    }

    @Override
    public void shutdown() {
        // Device memory, IPC mappings and shared memory belong to the communicators: closing them releases it all.
        new CleanupSteps()
                .add("close communicators left open", SparkCcl::closeAll)
                .add("forget the driver's settings", () -> settingsFromDriver = null)
                .runAll();
    }
}
