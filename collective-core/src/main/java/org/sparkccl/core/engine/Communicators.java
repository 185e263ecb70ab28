package org.sparkccl.core.engine;

import java.util.ArrayList;
import java.util.List;
import java.util.function.BooleanSupplier;
import org.sparkccl.core.Bootstrap;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.log.CclLog;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.transport.LocalMemoryTransport;
import org.sparkccl.core.transport.MemoryTransport;
import org.sparkccl.core.shm.ShmTransport;

/** Builds communicators with the transports this module provides. */
public final class Communicators {
    private Communicators() {
    }

    /**
     * A host-memory communicator: shared memory between processes of a host, plain memory within one
     * JVM, TCP between hosts (two-level where every host has the same number of ranks) or wherever
     * SPARKCCL_SHM_DISABLE=1 keeps processes from sharing memory: see {@link HostEngines}.
     */
    public static Communicator host(Bootstrap bootstrap, Params params) {
        return host(bootstrap, params, () -> false);
    }

    /** As {@link #host(Bootstrap, Params)}; {@code cancelled} is polled while waiting (Spark task kill). */
    public static Communicator host(Bootstrap bootstrap, Params params, BooleanSupplier cancelled) {
        return HostEngines.create(bootstrap, rank -> hostTransports(rank, params), params, cancelled);
    }

    /**
     * In order of preference: /dev/shm (reaches every rank of the host, the same JVM included), then
     * plain process memory (same JVM only, for hosts without a usable /dev/shm or SPARKCCL_SHM_DISABLE=1).
     */
    public static List<MemoryTransport> hostTransports(int rank, Params params) {
        List<MemoryTransport> transports = new ArrayList<>();
        transports.add(new ShmTransport(params, new CclLog(rank, params)));
        transports.add(new LocalMemoryTransport());
        return transports;
    }
}
