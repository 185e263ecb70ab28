package org.sparkccl.spark;

import java.util.Map;
import org.apache.spark.SparkContext;
import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.PluginContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.sparkccl.core.param.Params;

/**
 * Driver half of the plugin: refuses a configuration that would hang or break sparkccl before any
 * job starts (the SparkContext then fails to start, with the reason), and hands the validated
 * {@code spark.sparkccl.*} settings to every executor.
 */
final class SparkCclDriverPlugin implements DriverPlugin {
    private static final Logger LOG = LoggerFactory.getLogger(SparkCclDriverPlugin.class);

    @Override
    public Map<String, String> init(SparkContext sc, PluginContext pluginContext) {
        Params params = SparkConfCheck.validate(sc.getConf());
        for (String line : params.describeSet()) {
            LOG.info("sparkccl setting {}", line);
        }
        return SparkCclSettings.sparkcclEntries(sc.getConf());
    }
}
