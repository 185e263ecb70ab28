package org.sparkccl.spark;

import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;
import java.util.function.BooleanSupplier;
import org.apache.spark.BarrierTaskContext;
import org.apache.spark.BarrierTaskInfo;
import org.sparkccl.core.Bootstrap;
import org.sparkccl.core.CclException;
import org.sparkccl.core.bootstrap.SharedDirectoryBootstrap;
import org.sparkccl.core.param.Params;

/**
 * Which bootstrap a barrier stage's ranks meet through ({@link SparkCclSettings#BOOTSTRAP}):
 * {@link Kind#HOST}, a directory in /dev/shm of the one machine every task runs on (milliseconds), or
 * {@link Kind#SPARK}, {@code BarrierTaskContext.allGather} (about a second in Spark 4.2, any placement).
 *
 * <p>The verdict needs no communication: {@link BarrierTaskContext#getTaskInfos()} gives every task
 * the addresses of all the stage's tasks, the same list on each, so every rank decides alike and none
 * waits in a bootstrap its peers did not choose.
 */
public final class StageBootstrap {
    /** The bootstrap a stage used. */
    public enum Kind {
        /** A directory of the one host the stage runs on ({@link SharedDirectoryBootstrap}). */
        HOST,
        /** {@code BarrierTaskContext.allGather} ({@link BarrierBootstrap}). */
        SPARK
    }

    private StageBootstrap() {
    }

    /**
     * The kind for a stage whose tasks run at {@code taskAddresses} ({@code host:port} of each task's
     * executor, as {@link BarrierTaskInfo#address()} says), under the setting {@code setting} (auto,
     * spark or host). Throws, alike on every rank, where {@code host} is asked for a stage that spans
     * hosts.
     */
    static Kind decide(String setting, List<String> taskAddresses) {
        TreeSet<String> hosts = new TreeSet<>();
        for (String address : taskAddresses) {
            hosts.add(hostOf(address));
        }
        switch (setting) {
            case "spark":
                return Kind.SPARK;
            case "host":
                if (hosts.size() > 1) {
                    throw new CclException(SparkCclSettings.BOOTSTRAP.sparkConfKey() + "=host, but the tasks of this"
                            + " barrier stage run on " + hosts.size() + " hosts " + hosts + ": the host bootstrap meets in"
                            + " a directory of one machine; set it to auto (or spark) for stages that span hosts");
                }
                return Kind.HOST;
            case "auto":
                return hosts.size() <= 1 ? Kind.HOST : Kind.SPARK;
            default:
                throw new IllegalArgumentException("bad value '" + setting + "' for "
                        + SparkCclSettings.BOOTSTRAP.sparkConfKey() + ": expected auto, spark or host");
        }
    }

    /**
     * The key of a stage attempt's rendezvous directory: app id, stage id and stage attempt number. The
     * attempt number keeps a retried stage away from what a failed attempt left behind.
     */
    static String key(String appId, int stageId, int stageAttempt) {
        return appId.replaceAll("[^A-Za-z0-9._-]", "_") + "-stage" + stageId + "-attempt" + stageAttempt;
    }

    /** The bootstrap of {@code kind} for the current task's stage; {@code cancelled} is polled while it waits. */
    static Bootstrap open(Kind kind, BarrierTaskContext context, String appId, Params params, BooleanSupplier cancelled) {
        if (kind == Kind.SPARK) {
            return new BarrierBootstrap(context);
        }
        return SharedDirectoryBootstrap.open(SharedDirectoryBootstrap.defaultRoot(),
                key(appId, context.stageId(), context.stageAttemptNumber()), context.partitionId(),
                context.numPartitions(), params.get(Params.TIMEOUT_MS), cancelled);
    }

    /** Every task's executor address, by partition. */
    static List<String> taskAddresses(BarrierTaskContext context) {
        List<String> out = new ArrayList<>();
        for (BarrierTaskInfo info : context.getTaskInfos()) {
            out.add(info.address());
        }
        return out;
    }

    /** {@code host} of {@code host:port}; an address without a port is a host already. */
    private static String hostOf(String address) {
        int colon = address.lastIndexOf(':');
        return colon < 0 ? address : address.substring(0, colon);
    }
}
