package org.sparkccl.core.engine;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.ServiceConfigurationError;
import java.util.ServiceLoader;
import java.util.function.BiFunction;
import java.util.function.BooleanSupplier;
import java.util.function.Function;
import java.util.function.IntFunction;
import java.util.function.Predicate;
import java.util.stream.Collectors;
import org.sparkccl.core.Bootstrap;
import org.sparkccl.core.CclException;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.log.CclLog;
import org.sparkccl.core.log.Subsys;
import org.sparkccl.core.net.HostLayout;
import org.sparkccl.core.net.NetRound;
import org.sparkccl.core.net.SocketCommunicator;
import org.sparkccl.core.net.SocketListener;
import org.sparkccl.core.net.SplitRound;
import org.sparkccl.core.net.TwoLevelCommunicator;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.shm.ShmCommunicator;
import org.sparkccl.core.shm.ShmTransport;
import org.sparkccl.core.transport.HostIdentity;
import org.sparkccl.core.transport.LocalMemoryTransport;
import org.sparkccl.core.transport.MemoryTransport;
import org.sparkccl.core.transport.RankInfo;

/**
 * The one place that chooses a rank's engine. First the kind ({@link #choose}): the GPU engine where
 * the rank has a GPU and CUDA works here (the engine comes from the {@link GpuEngineProvider}
 * registered with {@link ServiceLoader}), else the host engine. Then, in the one bootstrap round, the
 * layout: every rank binds its socket listener first and sends its address and host id
 * ({@link HostIdentity#hostId(Params)}) with the one-host engine's description; every rank then decides
 * alike, from what was gathered:
 * <ul>
 *   <li>The one-host engine reaches every rank (host engine: all ranks share memory, one process or one
 *       /dev/shm device; GPU engine: all ranks on one host): it gets the round's engine half and runs as
 *       always; the listener closes unused.</li>
 *   <li>Host engine: several hosts with the same number L ≥ 2 of ranks each, the ranks of each host
 *       able to share memory: {@link TwoLevelCommunicator}; otherwise (one rank per host, uneven hosts,
 *       or processes that cannot share memory, e.g. with {@code SPARKCCL_SHM_DISABLE=1}) one
 *       {@link SocketCommunicator} ring over every rank.</li>
 *   <li>GPU engine: the two-level GPU engine over the hosts where every host has the same number of
 *       ranks, else over every rank alone (one TCP ring through pinned host memory).</li>
 * </ul>
 */
public final class Engines {
    /** The engines a rank can run; Spark states it in each rank's placement, so that ranks that differ fail together. */
    public enum Kind {
        HOST, GPU
    }

    /** The transport a rank would expose its memory through (empty: none). */
    static final String ENTRY_SHARING = "net.sharing";
    private static volatile GpuEngineProvider gpuProvider;

    private Engines() {
    }

    /** The engine of a rank that has a GPU bound ({@code gpuBound}) or not; logs why. */
    public static Kind choose(int rank, boolean gpuBound, Params params) {
        CclLog log = new CclLog(rank, params);
        if (!gpuBound) {
            log.info(Subsys.INIT, "host engine: this rank has no GPU");
            return Kind.HOST;
        }
        String why = gpuUnavailableReason();
        if (why != null) {
            log.info(Subsys.INIT, "host engine: this rank has a GPU, but GPUs cannot be used here: %s", why);
            return Kind.HOST;
        }
        log.info(Subsys.INIT, "GPU engine: this rank has a GPU and CUDA works here");
        return Kind.GPU;
    }

    /**
     * The engine of {@code kind}; {@code gpuOrdinal} (as CUDA numbers this process's visible GPUs) is
     * read for {@link Kind#GPU} only. {@code cancelled} (Spark's task-killed flag) is polled while a
     * collective waits.
     */
    public static Communicator create(Kind kind, Bootstrap bootstrap, int gpuOrdinal, Params params,
                                      BooleanSupplier cancelled) {
        return kind == Kind.GPU ? gpu(bootstrap, gpuOrdinal, params, cancelled) : host(bootstrap, params, cancelled);
    }

    /**
     * A host-memory communicator: shared memory between processes of a host, plain memory within one
     * JVM, TCP between hosts (two-level where every host has the same number of ranks) or wherever
     * SPARKCCL_SHM_DISABLE=1 keeps processes from sharing memory.
     */
    public static Communicator host(Bootstrap bootstrap, Params params) {
        return host(bootstrap, params, () -> false);
    }

    /** As {@link #host(Bootstrap, Params)}; {@code cancelled} is polled while waiting (Spark task kill). */
    public static Communicator host(Bootstrap bootstrap, Params params, BooleanSupplier cancelled) {
        return host(bootstrap, rank -> hostTransports(rank, params), params, cancelled);
    }

    /**
     * As {@link #host(Bootstrap, Params, BooleanSupplier)}, sharing memory through {@code transports}
     * (in order of preference) for a rank number; the engine owns and closes them.
     */
    public static Communicator host(Bootstrap bootstrap, IntFunction<List<MemoryTransport>> transports, Params params,
                                    BooleanSupplier cancelled) {
        List<MemoryTransport> mine = transports.apply(bootstrap.rank());
        return inOneRound(bootstrap, params, info -> info.withEntry(ENTRY_SHARING, sharing(mine)), Engines::shareMemory, "the ranks cannot all share memory (they span hosts, or shared memory is"
                        + " disabled between processes)",
                round -> ShmCommunicator.create(round, mine, params, cancelled),
                (listener, all) -> overSockets(listener, all, bootstrap.rank(), transports, params, cancelled));
    }

    /**
     * A communicator whose rank runs on GPU {@code deviceOrdinal}, over one host or several. Every rank
     * calls this together: it makes exactly one {@code allGather} on the bootstrap. {@code cancelled}
     * (Spark's task-killed flag) is polled while a collective runs; when it turns true every rank's
     * collective ends with an error and the communicator is unusable; it must not depend on the calling
     * thread. Throws with the reason where GPUs cannot be used ({@link #gpuUnavailableReason()}).
     */
    public static Communicator gpu(Bootstrap bootstrap, int deviceOrdinal, Params params, BooleanSupplier cancelled) {
        String why = gpuUnavailableReason();
        if (why != null) {
            throw new IllegalStateException("GPUs cannot be used here: " + why);
        }
        GpuEngineProvider gpus = gpuProvider();
        int rank = bootstrap.rank();
        return inOneRound(bootstrap, params, info -> info, Engines::oneHost, "the ranks run on several hosts",
                round -> gpus.oneHost(round, deviceOrdinal, params, cancelled),
                (listener, all) -> gpus.acrossHosts(listener, all, rank, gpuLayout(all, new CclLog(rank, params)),
                        deviceOrdinal, params, cancelled));
    }

    /** Null when the GPU engine can be used in this process, otherwise why not. */
    public static String gpuUnavailableReason() {
        GpuEngineProvider gpus = gpuProvider();
        return gpus == null ? "no GPU engine on the class path (the ipc module, with JCuda, provides it)"
                : gpus.unavailableReason();
    }

    /** GPUs this process can use; 0 without the GPU engine or CUDA. */
    public static int visibleGpus() {
        return gpuUnavailableReason() == null ? gpuProvider().visibleDevices() : 0;
    }

    /**
     * The skeleton both engines share: {@code oneLevel} on the round where it reaches every rank
     * ({@code reach}), else {@code acrossHosts} over the started socket listener. {@code describe}
     * adds what {@code reach} reads to this rank's description.
     */
    private static Communicator inOneRound(Bootstrap bootstrap, Params params, Function<RankInfo, RankInfo> describe,
                                           Predicate<List<RankInfo>> reach, String outOfReach,
                                           Function<Bootstrap, Communicator> oneLevel,
                                           BiFunction<SocketListener, RankInfo[], Communicator> acrossHosts) {
        if (bootstrap.size() == 1) {
            return oneLevel.apply(bootstrap);
        }
        int rank = bootstrap.rank();
        // A rank that cannot listen still takes part (one level needs no socket); should the ranks turn
        // out to need TCP, it fails then with this reason, and its peers name it.
        SocketListener listener = null;
        RuntimeException cannotListen = null;
        try {
            listener = SocketListener.open(rank, params, new CclLog(rank, params));
        } catch (RuntimeException e) {
            cannotListen = e;
        }
        try {
            RankInfo mine = describe.apply(new RankInfo(rank, bootstrap.size(), HostIdentity.hostId(params),
                    HostIdentity.pid(), HostIdentity.shmDevice(), Map.of()));
            SplitRound round = new SplitRound(bootstrap, listener == null ? mine : NetRound.describe(mine, listener),
                    reach, outOfReach);
            try {
                return oneLevel.apply(round);
            } catch (SplitRound.OutOfReach e) {
                if (cannotListen != null) {
                    throw new CclException("rank " + rank + ": the ranks need TCP between them (" + outOfReach
                            + "), but this rank cannot listen: " + cannotListen.getMessage(), cannotListen);
                }
                RankInfo[] all = round.all();
                listener.start(NetRound.secretShares(all));
                return acrossHosts.apply(listener, all);
            }
        } finally {
            if (listener != null) {
                listener.close();
            }
        }
    }

    /** The name of the first of {@code transports} that works here (empty: none), for {@link #shareMemory}. */
    private static byte[] sharing(List<MemoryTransport> transports) {
        return transports.stream().filter(t -> t.unavailableReason() == null).map(MemoryTransport::name).findFirst()
                .orElse("").getBytes(StandardCharsets.UTF_8);
    }

    /**
     * In order of preference: /dev/shm (reaches every rank of the host, the same JVM included), then
     * plain process memory (same JVM only, for hosts without a usable /dev/shm or SPARKCCL_SHM_DISABLE=1).
     */
    private static List<MemoryTransport> hostTransports(int rank, Params params) {
        List<MemoryTransport> transports = new ArrayList<>();
        transports.add(new ShmTransport(params, new CclLog(rank, params)));
        transports.add(new LocalMemoryTransport());
        return transports;
    }

    private static Communicator overSockets(SocketListener listener, RankInfo[] all, int rank,
                                            IntFunction<List<MemoryTransport>> transports, Params params,
                                            BooleanSupplier cancelled) {
        CclLog log = new CclLog(rank, params);
        HostLayout layout = HostLayout.of(all);
        int perHost = layout.perHost();
        boolean twoLevel = layout.hosts() >= 2 && perHost >= 2 && layout.even()
                && Arrays.stream(layout.byHost()).allMatch(ranks -> shareMemory(infos(all, ranks)));
        if (twoLevel) {
            log.info(Subsys.INIT, "ranks on %d hosts, %d each: two-level (shared memory inside a host, TCP across)",
                    layout.hosts(), perHost);
            return TwoLevelCommunicator.create(listener, all, rank, layout.byHost(), transports, params, cancelled);
        }
        log.info(Subsys.INIT, "ranks on %d host(s), %s: one ring over TCP", layout.hosts(),
                layout.hosts() == 1 ? "unable to share memory" : "unevenly spread, one per host or unable to share memory");
        int[] everyone = new int[all.length];
        for (int r = 0; r < all.length; r++) {
            everyone[r] = r;
        }
        return SocketCommunicator.create(listener, all, rank, everyone, 0, params, cancelled);
    }

    private static List<RankInfo> infos(RankInfo[] all, int[] ranks) {
        return Arrays.stream(ranks).mapToObj(r -> all[r]).collect(Collectors.toList());
    }

    /**
     * Whether these ranks can share memory: one process, or one host where each exposes through the
     * same transport that reaches across processes, on one /dev/shm device. Decided from the round's
     * data alone, so that every rank decides alike.
     */
    static boolean shareMemory(List<RankInfo> ranks) {
        RankInfo first = ranks.get(0);
        String transport = new String(first.entry(ENTRY_SHARING), StandardCharsets.UTF_8);
        boolean oneProcess = ranks.stream().allMatch(r -> r.sameProcess(first));
        boolean oneShm = !transport.isEmpty() && !transport.equals(LocalMemoryTransport.NAME)
                && ranks.stream().allMatch(r -> r.sameHost(first) && r.shmDevice() == first.shmDevice()
                && transport.equals(new String(r.entry(ENTRY_SHARING), StandardCharsets.UTF_8)));
        return oneProcess || oneShm;
    }

    /** Every rank on one host (the same answer on every rank: the round's data alone). */
    static boolean oneHost(List<RankInfo> ranks) {
        return ranks.stream().allMatch(r -> r.sameHost(ranks.get(0)));
    }

    /** The groups the two-level GPU engine runs over: the hosts where they are even, else every rank alone. */
    static HostLayout gpuLayout(RankInfo[] all, CclLog log) {
        HostLayout hosts = HostLayout.of(all);
        if (hosts.even()) {
            log.info(Subsys.INIT, "ranks on %d hosts, %d each (%s): two-level (the GPU engine inside a host, TCP"
                    + " across through pinned host memory)", hosts.hosts(), hosts.perHost(), hosts);
            return hosts;
        }
        log.info(Subsys.INIT, "ranks on %d hosts, unevenly spread (%s): one ring over TCP through pinned host memory"
                + " (no GPU hop inside a host; spread the ranks evenly over the hosts for the two-level all-reduce)",
                hosts.hosts(), hosts);
        return HostLayout.eachRankAlone(all.length);
    }

    /** The registered GPU engine, looked up once; null where no module registers one. */
    private static GpuEngineProvider gpuProvider() {
        GpuEngineProvider p = gpuProvider;
        if (p == null) {
            synchronized (Engines.class) {
                p = gpuProvider;
                if (p == null) {
                    p = registeredGpuProvider();
                    gpuProvider = p;
                }
            }
        }
        return p;
    }

    private static GpuEngineProvider registeredGpuProvider() {
        Iterator<GpuEngineProvider> it =
                ServiceLoader.load(GpuEngineProvider.class, Engines.class.getClassLoader()).iterator();
        try {
            return it.hasNext() ? it.next() : null;
        } catch (ServiceConfigurationError e) {
            // Reported as the reason GPUs cannot be used; the host engine still works.
            return new Unavailable("the registered GPU engine could not be loaded: " + e);
        }
    }

    /** A GPU engine that cannot be used, for the reason given. */
    private record Unavailable(String unavailableReason) implements GpuEngineProvider {
        @Override
        public int visibleDevices() {
            return 0;
        }

        @Override
        public Communicator oneHost(Bootstrap bootstrap, int deviceOrdinal, Params params, BooleanSupplier cancelled) {
            throw new IllegalStateException("GPUs cannot be used here: " + unavailableReason);
        }

        @Override
        public Communicator acrossHosts(SocketListener listener, RankInfo[] all, int rank, HostLayout layout,
                                        int deviceOrdinal, Params params, BooleanSupplier cancelled) {
            throw new IllegalStateException("GPUs cannot be used here: " + unavailableReason);
        }
    }
}
