package org.sparkccl.spark;

import org.apache.logging.log4j.Level;
import org.apache.logging.log4j.core.config.Configurator;

/**
 * For a job run with {@code java -cp} on an embedded Spark: Spark's own INFO lines at WARN, and
 * sparkccl's progress lines at INFO, so that the console shows the training and not the scheduler.
 * (Under spark-submit the cluster's log4j2 configuration decides.)
 */
public final class QuietLogs {
    private QuietLogs() {
    }

    public static void forEmbeddedRun() {
        Configurator.setRootLevel(Level.WARN);
        Configurator.setLevel("org.sparkccl", Level.INFO);
    }
}
