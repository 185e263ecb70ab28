package org.sparkccl.core.net;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
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
import org.sparkccl.core.transport.MemoryTransport;
import org.sparkccl.core.transport.RankInfo;

/**
 * Builds the CPU engine that fits where the ranks are, in the one bootstrap round: every rank binds
 * its socket listener first and sends its address with the shared-memory engine's description.
 * <ul>
 *   <li>All ranks on one host (and shared memory allowed, or all in one process): the
 *       {@link HostCommunicator} gets the round's shared-memory half and runs as always; the
 *       listener closes unused.</li>
 *   <li>Several hosts with L ≥ 2 ranks each: {@link TwoLevelCommunicator}.</li>
 *   <li>Otherwise (one rank per host, uneven hosts, or {@code SPARKCCL_SHM_DISABLE=1} between
 *       processes): one {@link SocketCommunicator} ring over every rank.</li>
 * </ul>
 */
public final class HostEngines {
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
        try (SocketListener listener = SocketListener.open(bootstrap.rank(), params, log)) {
            RankInfo mine = NetRound.describe(new RankInfo(bootstrap.rank(), bootstrap.size(), HostIdentity.hostId(params),
                    HostIdentity.pid(), HostIdentity.shmDevice(), Map.of()), listener);
            SplitRound round = new SplitRound(bootstrap, mine, !params.get(Params.SHM_DISABLE));
            try {
                return HostCommunicator.create(round, transports.apply(bootstrap.rank()), params, cancelled);
            } catch (NotOneHost e) {
                return overSockets(listener, round.all, bootstrap.rank(), transports, params, cancelled, log);
            }
        }
    }

    private static Communicator overSockets(SocketListener listener, RankInfo[] all, int rank,
                                            IntFunction<List<MemoryTransport>> transports, Params params,
                                            BooleanSupplier cancelled, CclLog log) {
        listener.start(NetRound.secretShares(all));
        Map<String, List<Integer>> hosts = new LinkedHashMap<>();
        for (RankInfo info : all) {
            hosts.computeIfAbsent(info.hostId(), h -> new ArrayList<>()).add(info.rank());
        }
        int perHost = hosts.values().iterator().next().size();
        boolean even = hosts.values().stream().allMatch(ranks -> ranks.size() == perHost);
        if (hosts.size() >= 2 && perHost >= 2 && even && !params.get(Params.SHM_DISABLE)) {
            log.info(Subsys.INIT, "ranks on %d hosts, %d each: two-level (shared memory inside a host, TCP across)",
                    hosts.size(), perHost);
            int[][] byHost = new int[hosts.size()][];
            int h = 0;
            for (List<Integer> ranks : hosts.values()) {
                byHost[h++] = ranks.stream().mapToInt(Integer::intValue).toArray();
            }
            return TwoLevelCommunicator.create(listener, all, rank, byHost, transports, params, cancelled);
        }
        log.info(Subsys.INIT, "ranks on %d host(s)%s: one ring over TCP", hosts.size(),
                params.get(Params.SHM_DISABLE) ? ", shared memory disabled (SPARKCCL_SHM_DISABLE)" : "");
        int[] everyone = new int[all.length];
        for (int r = 0; r < all.length; r++) {
            everyone[r] = r;
        }
        return SocketCommunicator.create(listener, all, rank, everyone, 0, params, cancelled);
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
        private final boolean shmAllowed;
        RankInfo[] all;

        SplitRound(Bootstrap real, RankInfo mine, boolean shmAllowed) {
            this.real = real;
            this.mine = mine;
            this.shmAllowed = shmAllowed;
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
            boolean oneHost = true;
            boolean oneProcess = true;
            for (int r = 0; r < gathered.length; r++) {
                byte[][] parts = split(gathered[r], r);
                infos[r] = RankInfo.decode(parts[0], r, gathered.length);
                engineParts[r] = parts[1];
                oneHost &= infos[r].sameHost(mine);
                oneProcess &= infos[r].sameProcess(mine);
            }
            all = infos;
            if (!oneHost || !(shmAllowed || oneProcess)) {
                throw new NotOneHost("rank " + rank() + ": " + (oneHost ? "shared memory is disabled" : "the ranks span hosts")
                        + ": the socket transport connects them");
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
