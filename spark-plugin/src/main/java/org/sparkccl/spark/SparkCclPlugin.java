package org.sparkccl.spark;

import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.SparkPlugin;

/**
 * sparkccl's Spark plugin: {@code --conf spark.plugins=org.sparkccl.spark.SparkCclPlugin}. It only
 * hands Spark the driver and executor halves, which do the work.
 */
public final class SparkCclPlugin implements SparkPlugin {
    @Override
    public DriverPlugin driverPlugin() {
        return new SparkCclDriverPlugin();
    }

    @Override
    public ExecutorPlugin executorPlugin() {
        return new SparkCclExecutorPlugin();
    }
}
