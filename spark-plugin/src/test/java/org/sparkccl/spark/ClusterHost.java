package org.sparkccl.spark;

import java.util.List;
import java.util.Map;

/**
 * One host of {@link StandaloneClusterIT}'s cluster.
 *
 * @param name               names its worker's log and work directory
 * @param address            what its Spark processes bind and advertise (SPARK_LOCAL_IP, --host)
 * @param wrapper            the command its processes start through (none: this machine as it is)
 * @param workerEnvironment  added to its worker's environment, which the executors inherit
 * @param hostId             the host id sparkccl's ranks on it report (HostIdentity)
 */
record ClusterHost(String name, String address, List<String> wrapper, Map<String, String> workerEnvironment,
                   String hostId) {

    /** This machine, on 127.0.0.1, as it is. */
    static ClusterHost thisMachine() {
        return new ClusterHost("local", "127.0.0.1", List.of(), Map.of(), "");
    }

    /** A host that executors of this machine pretend to be on (SPARKCCL_HOST_ID), on 127.0.0.1. */
    static ClusterHost pretend(String name) {
        return new ClusterHost(name, "127.0.0.1", List.of(), Map.of("SPARKCCL_HOST_ID", name), "pretend:" + name);
    }
}
