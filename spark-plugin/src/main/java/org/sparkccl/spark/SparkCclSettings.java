package org.sparkccl.spark;

import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.sparkccl.core.param.Param;
import org.sparkccl.core.param.Params;
import scala.Tuple2;

/**
 * The Spark side of sparkccl's parameters: the ones only Spark needs (defined here, in the one
 * registry), and the reading of {@code spark.sparkccl.<confName>} keys from a Spark conf. Every
 * sparkccl parameter can be set that way; the environment ({@code SPARKCCL_*}) is read first and
 * Spark conf wins.
 */
public final class SparkCclSettings {
    /** Prefix of every sparkccl key in Spark conf. */
    public static final String PREFIX = "spark.sparkccl.";

    public static final Param<Boolean> ALLOW_SHARED_GPU = Params.define("ALLOW_SHARED_GPU", false,
            "1 lets two ranks of a barrier stage use one GPU (tests, small GPUs); by default each rank needs its own",
            Params::parseBoolean);
    public static final Param<String> BOOTSTRAP = Params.define("BOOTSTRAP", "auto",
            "how the ranks of a barrier stage meet to build their communicator: host (a directory in /dev/shm of"
                    + " their one machine: milliseconds; every task of the stage must run on one host), spark"
                    + " (BarrierTaskContext.allGather: about a second, any placement) or auto (host where every task"
                    + " of the stage runs on one host, spark otherwise)",
            s -> Params.oneOfIgnoringCase(s, "auto", "spark", "host"));

    private SparkCclSettings() {
    }

    /** The {@code spark.sparkccl.*} entries of {@code conf}, keys as written. */
    public static Map<String, String> sparkcclEntries(SparkConf conf) {
        Map<String, String> out = new LinkedHashMap<>();
        for (Tuple2<String, String> e : conf.getAll()) {
            if (e._1().startsWith(PREFIX)) {
                out.put(e._1(), e._2());
            }
        }
        return out;
    }

    /**
     * Environment and system properties, overridden by these {@code spark.sparkccl.*} entries.
     * An unknown key or a bad value is refused with the list of known names.
     */
    public static Params resolve(Map<String, String> sparkcclEntries) {
        return Params.fromEnvironment().withOverrides(sparkcclEntries);
    }

    public static Params resolve(SparkConf conf) {
        return resolve(sparkcclEntries(conf));
    }

    /**
     * {@code params} with the socket transport's address ({@code SPARKCCL_SOCKET_ADDRESS}) defaulting
     * to this executor's host as Spark advertises it (its block manager's, by which the driver and the
     * other executors reach it), where neither the environment nor Spark conf sets one. The transport's
     * own default, the first interface that is up and not loopback, may be one the other hosts cannot
     * reach (a container bridge that every host has, a second network); and a setting in Spark conf
     * is one address for every executor, so it only fits executors of one machine.
     */
    public static Params withExecutorSocketAddress(Params params, String executorHost) {
        if (params.isSet(Params.SOCKET_ADDRESS) || executorHost == null || executorHost.isBlank()) {
            return params;
        }
        return params.withOverrides(Map.of(Params.SOCKET_ADDRESS.envName(), executorHost));
    }

    /**
     * {@code params} with the {@code spark.sparkccl.*} local properties of the task's job applied
     * ({@code SparkContext.setLocalProperty} on the driver thread that submits it): settings for the
     * stages of one job, e.g. the bootstrap of one fit, where Spark conf holds one value for the whole
     * application. Every task of a stage sees the same properties, so the ranks still agree.
     */
    public static Params withJobProperties(Params params, TaskContext context) {
        Map<String, String> set = new LinkedHashMap<>();
        for (Param<?> p : Params.all()) {
            String value = context.getLocalProperty(p.sparkConfKey());
            if (value != null) {
                set.put(p.sparkConfKey(), value);
            }
        }
        return set.isEmpty() ? params : params.withOverrides(set);
    }

    /**
     * The parameters for a task in this JVM: what the driver plugin passed to this executor when the
     * plugin is installed, else this executor's Spark conf, else the environment alone.
     */
    public static Params forCurrentProcess() {
        Map<String, String> fromPlugin = SparkCclExecutorPlugin.settingsFromDriver();
        if (fromPlugin != null) {
            return resolve(fromPlugin);
        }
        SparkEnv env = SparkEnv.get();
        return env == null ? resolve(Map.of()) : resolve(env.conf());
    }
}
