package org.sparkccl.core.engine;

import org.sparkccl.core.net.HostLayout;
import org.sparkccl.core.net.NetRound;
import org.sparkccl.core.net.SocketCommunicator;
import org.sparkccl.core.net.SocketListener;
import org.sparkccl.core.net.SplitRound;
import org.sparkccl.core.net.TwoLevelCommunicator;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import java.util.function.BooleanSupplier;
import java.util.function.IntFunction;
import org.sparkccl.core.Bootstrap;
import org.sparkccl.core.CclException;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.shm.ShmCommunicator;
import org.sparkccl.core.log.CclLog;
import org.sparkccl.core.log.Subsys;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.transport.HostIdentity;
import org.sparkccl.core.transport.LocalMemoryTransport;
import org.sparkccl.core.transport.MemoryTransport;
import org.sparkccl.core.transport.RankInfo;

/**
 * Builds the CPU engine that fits where the ranks are, in the one bootstrap round: every rank binds
 * its socket listener first and sends its address, and the transport it would share memory through,
 * with the shared-memory engine's description. Every rank then decides alike, from what was gathered:
 * <ul>
 *   <li>All ranks can share memory (one process, or one host whose ranks all expose /dev/shm of one
 *       device): the {@link ShmCommunicator} gets the round's shared-memory half and runs as always;
 *       the listener closes unused.</li>
 *   <li>Several hosts with the same number L ≥ 2 of ranks each, the ranks of each host able to share
 *       memory: {@link TwoLevelCommunicator}.</li>
 *   <li>Otherwise (one rank per host, uneven hosts, or processes that cannot share memory, e.g. with
 *       {@code SPARKCCL_SHM_DISABLE=1}): one {@link SocketCommunicator} ring over every rank.</li>
 * </ul>
 */
public final class HostEngines {
    /** The transport a rank would expose its memory through (empty: none). */
    static final String ENTRY_SHARING = "net.sharing";
    private HostEngines() {
    }

    /**
     * {@code transports} gives the shared-memory transports (in order of preference) for a rank
     * number; the engine owns and closes them. {@code cancelled} is polled while waiting.
     */
    public static Communicator create(Bootstrap bootstrap, IntFunction<List<MemoryTransport>> transports, Params params,
                                      BooleanSupplier cancelled) {
        if (bootstrap.size() == 1) {
            return ShmCommunicator.create(bootstrap, transports.apply(0), params, cancelled);
        }
        CclLog log = new CclLog(bootstrap.rank(), params);
        List<MemoryTransport> hostTransports = transports.apply(bootstrap.rank());
        String sharing = hostTransports.stream().filter(t -> t.unavailableReason() == null).map(MemoryTransport::name)
                .findFirst().orElse("");
        // A rank that cannot listen still takes part (shared memory needs no socket); should the
        // ranks turn out to need TCP, it fails then with this reason, and its peers name it.
        SocketListener listener = null;
        RuntimeException cannotListen = null;
        try {
            listener = SocketListener.open(bootstrap.rank(), params, log);
        } catch (RuntimeException e) {
            cannotListen = e;
        }
        try {
            RankInfo mine = new RankInfo(bootstrap.rank(), bootstrap.size(), HostIdentity.hostId(params),
                    HostIdentity.pid(), HostIdentity.shmDevice(), Map.of())
                    .withEntry(ENTRY_SHARING, sharing.getBytes(StandardCharsets.UTF_8));
            SplitRound round = new SplitRound(bootstrap, listener == null ? mine : NetRound.describe(mine, listener),
                    HostEngines::shareMemory, "the ranks cannot all share memory (they span hosts, or shared memory is"
                    + " disabled between processes)");
            try {
                return ShmCommunicator.create(round, hostTransports, params, cancelled);
            } catch (SplitRound.OutOfReach e) {
                if (cannotListen != null) {
                    throw new CclException("rank " + bootstrap.rank() + ": the ranks need TCP between them, but this"
                            + " rank cannot listen: " + cannotListen.getMessage(), cannotListen);
                }
                return overSockets(listener, round.all(), bootstrap.rank(), transports, params, cancelled, log);
            }
        } finally {
            if (listener != null) {
                listener.close();
            }
        }
    }

    private static Communicator overSockets(SocketListener listener, RankInfo[] all, int rank,
                                            IntFunction<List<MemoryTransport>> transports, Params params,
                                            BooleanSupplier cancelled, CclLog log) {
        listener.start(NetRound.secretShares(all));
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
}
