package org.sparkccl.core.net;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.BooleanSupplier;
import java.util.function.IntFunction;
import org.sparkccl.core.Bootstrap;
import org.sparkccl.core.CclException;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.HostCommunicator;
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
 *       device): the {@link HostCommunicator} gets the round's shared-memory half and runs as always;
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
            return HostCommunicator.create(bootstrap, transports.apply(0), params, cancelled);
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
            SplitRound round = new SplitRound(bootstrap, listener == null ? mine : NetRound.describe(mine, listener));
            try {
                return HostCommunicator.create(round, hostTransports, params, cancelled);
            } catch (NotOneHost e) {
                if (cannotListen != null) {
                    throw new CclException("rank " + bootstrap.rank() + ": the ranks need TCP between them, but this"
                            + " rank cannot listen: " + cannotListen.getMessage(), cannotListen);
                }
                return overSockets(listener, round.all, bootstrap.rank(), transports, params, cancelled, log);
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
        Map<String, List<RankInfo>> hosts = new LinkedHashMap<>();
        for (RankInfo info : all) {
            hosts.computeIfAbsent(info.hostId(), h -> new ArrayList<>()).add(info);
        }
        int perHost = hosts.values().iterator().next().size();
        boolean twoLevel = hosts.size() >= 2 && perHost >= 2
                && hosts.values().stream().allMatch(ranks -> ranks.size() == perHost && shareMemory(ranks));
        if (twoLevel) {
            log.info(Subsys.INIT, "ranks on %d hosts, %d each: two-level (shared memory inside a host, TCP across)",
                    hosts.size(), perHost);
            int[][] byHost = new int[hosts.size()][];
            int h = 0;
            for (List<RankInfo> ranks : hosts.values()) {
                byHost[h++] = ranks.stream().mapToInt(RankInfo::rank).toArray();
            }
            return TwoLevelCommunicator.create(listener, all, rank, byHost, transports, params, cancelled);
        }
        log.info(Subsys.INIT, "ranks on %d host(s), %s: one ring over TCP", hosts.size(),
                hosts.size() == 1 ? "unable to share memory" : "unevenly spread, one per host or unable to share memory");
        int[] everyone = new int[all.length];
        for (int r = 0; r < all.length; r++) {
            everyone[r] = r;
        }
        return SocketCommunicator.create(listener, all, rank, everyone, 0, params, cancelled);
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

    /** Thrown into the shared-memory engine's construction when its peers are not all within reach. */
    private static final class NotOneHost extends CclException {
        NotOneHost(String message) {
            super(message);
        }
    }

    /**
     * The one real round, on behalf of the shared-memory engine: each rank's bytes carry its socket
     * description too. When the ranks are not all within shared memory's reach, the engine's
     * construction ends with {@link NotOneHost} (it cleans up as after any failure) and the caller
     * builds the socket engines from {@link #all}.
     */
    private static final class SplitRound implements Bootstrap {
        private final Bootstrap real;
        private final RankInfo mine;
        RankInfo[] all;

        SplitRound(Bootstrap real, RankInfo mine) {
            this.real = real;
            this.mine = mine;
        }

        @Override
        public int rank() {
            return real.rank();
        }

        @Override
        public int size() {
            return real.size();
        }

        @Override
        public byte[][] allGather(byte[] engineBytes) {
            if (all != null) {
                throw new IllegalStateException("rank " + rank() + ": the engine asked for a second bootstrap round");
            }
            byte[][] gathered = real.allGather(join(mine.encode(), engineBytes));
            RankInfo[] infos = new RankInfo[gathered.length];
            byte[][] engineParts = new byte[gathered.length][];
            for (int r = 0; r < gathered.length; r++) {
                byte[][] parts = split(gathered[r], r);
                infos[r] = RankInfo.decode(parts[0], r, gathered.length);
                engineParts[r] = parts[1];
            }
            all = infos;
            if (!shareMemory(java.util.Arrays.asList(infos))) {
                throw new NotOneHost("rank " + rank() + ": the ranks cannot all share memory (they span hosts, or"
                        + " shared memory is disabled between processes): the socket transport connects them");
            }
            return engineParts;
        }

        @Override
        public void barrier() {
            real.barrier();
        }

        private static byte[] join(byte[] a, byte[] b) {
            ByteArrayOutputStream bytes = new ByteArrayOutputStream();
            try (DataOutputStream out = new DataOutputStream(bytes)) {
                out.writeInt(a.length);
                out.write(a);
                out.writeInt(b.length);
                out.write(b);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            return bytes.toByteArray();
        }

        private static byte[][] split(byte[] joined, int from) {
            try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(joined))) {
                byte[][] parts = new byte[2][];
                for (int i = 0; i < 2; i++) {
                    int n = in.readInt();
                    if (n < 0 || n > joined.length) {
                        throw new IOException("bad length " + n);
                    }
                    parts[i] = new byte[n];
                    in.readFully(parts[i]);
                }
                return parts;
            } catch (IOException e) {
                throw new CclException("the description from rank " + from + " is damaged (" + e.getMessage()
                        + "); run the same sparkccl build on every executor", e);
            }
        }
    }
}
