package org.sparkccl.spark;

import com.codahale.metrics.Counter;
import com.codahale.metrics.MetricRegistry;
import com.codahale.metrics.Timer;
import java.util.concurrent.TimeUnit;

/**
 * What this JVM's ranks did, for Spark's metrics system: collectives run, bytes they carried (each
 * rank's buffer size, as nccl-tests counts), time spent in them, and communicators built. The
 * executor plugin registers these in its registry (they appear as {@code plugin.org.sparkccl.spark.SparkCclPlugin.*});
 * they count whether or not the plugin is installed.
 */
public final class CclMetrics {
    private static final Counter COLLECTIVES = new Counter();
    private static final Counter BYTES = new Counter();
    private static final Timer COLLECTIVE_TIME = new Timer();
    private static final Counter COMMUNICATORS = new Counter();

    private CclMetrics() {
    }

    /** Adds the counters to a plugin's registry. */
    static void registerIn(MetricRegistry registry) {
        registry.register("collectives", COLLECTIVES);
        registry.register("bytes", BYTES);
        registry.register("collectiveTime", COLLECTIVE_TIME);
        registry.register("communicators", COMMUNICATORS);
    }

    static void collective(long bytes, long nanos) {
        COLLECTIVES.inc();
        BYTES.inc(bytes);
        COLLECTIVE_TIME.update(nanos, TimeUnit.NANOSECONDS);
    }

    static void communicatorBuilt() {
        COMMUNICATORS.inc();
    }

    public static long collectives() {
        return COLLECTIVES.getCount();
    }

    public static long bytes() {
        return BYTES.getCount();
    }

    public static long communicators() {
        return COMMUNICATORS.getCount();
    }
}
