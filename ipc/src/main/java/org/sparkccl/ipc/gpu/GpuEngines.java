package org.sparkccl.ipc.gpu;

import java.util.List;
import java.util.Map;
import java.util.function.BooleanSupplier;
import org.sparkccl.core.Bootstrap;
import org.sparkccl.core.CclException;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.log.CclLog;
import org.sparkccl.core.log.Subsys;
import org.sparkccl.core.net.HostLayout;
import org.sparkccl.core.net.NetRound;
import org.sparkccl.core.net.SocketListener;
import org.sparkccl.core.net.SplitRound;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.transport.HostIdentity;
import org.sparkccl.core.transport.RankInfo;
import org.sparkccl.ipc.cuda.GpuSupport;

/**
 * Builds the GPU engine that fits where the ranks are, in the one bootstrap round (the GPU analogue of
 * the host engines' chooser, {@code HostEngines}): every rank binds its socket listener first and sends
 * its address and host id ({@link HostIdentity#hostId(Params)}: {@code SPARKCCL_HOST_ID} or
 * {@code spark.sparkccl.hostId}, else host name and boot id) with the GPU engine's description. Every
 * rank then decides alike, from what was gathered:
 * <ul>
 *   <li>All ranks on one host: the {@link GpuCommunicator} gets the round's GPU half and runs as
 *       always; the listener closes unused.</li>
 *   <li>Several hosts with the same number L of ranks each: {@link GpuTwoLevelCommunicator} (the GPU
 *       engine inside each host, TCP across through pinned host memory, one ring per local index).</li>
 *   <li>Hosts with different numbers of ranks: as the host engines do, one TCP ring over every rank,
 *       here through pinned host memory (a two-level layout where every rank is a group of its own).</li>
 * </ul>
 */
public final class GpuEngines {
    private GpuEngines() {
    }

    /**
     * A communicator whose rank runs on GPU {@code deviceOrdinal}, over one host or several. Every rank
     * calls this together: it makes exactly one {@code allGather} on the bootstrap. {@code cancelled}
     * as in {@link GpuCommunicators#create(Bootstrap, int, Params, BooleanSupplier)}. The result is a
     * {@link GpuCommunicator} on one host (stream-ordered calls included); across hosts it has the
     * blocking calls only.
     */
    public static Communicator create(Bootstrap bootstrap, int deviceOrdinal, Params params, BooleanSupplier cancelled) {
        GpuSupport.require();
        if (bootstrap.size() == 1) {
            return GpuCommunicator.create(bootstrap, deviceOrdinal, params, cancelled);
        }
        int rank = bootstrap.rank();
        CclLog log = new CclLog(rank, params);
        // A rank that cannot listen still takes part (one host needs no socket); should the ranks turn
        // out to span hosts, it fails then with this reason, and its peers name it.
        SocketListener listener = null;
        RuntimeException cannotListen = null;
        try {
            listener = SocketListener.open(rank, params, log);
        } catch (RuntimeException e) {
            cannotListen = e;
        }
        try {
            RankInfo mine = new RankInfo(rank, bootstrap.size(), HostIdentity.hostId(params), HostIdentity.pid(),
                    HostIdentity.shmDevice(), Map.of());
            SplitRound round = new SplitRound(bootstrap, listener == null ? mine : NetRound.describe(mine, listener),
                    GpuEngines::oneHost, "the ranks run on several hosts");
            try {
                return GpuCommunicator.create(round, deviceOrdinal, params, cancelled);
            } catch (SplitRound.OutOfReach e) {
                if (cannotListen != null) {
                    throw new CclException("rank " + rank + ": the ranks span hosts and need TCP between them, but this"
                            + " rank cannot listen: " + cannotListen.getMessage(), cannotListen);
                }
                RankInfo[] all = round.all();
                listener.start(NetRound.secretShares(all));
                return GpuTwoLevelCommunicator.create(listener, all, rank, layout(all, log), deviceOrdinal, params,
                        cancelled);
            }
        } finally {
            if (listener != null) {
                listener.close();
            }
        }
    }

    /** Every rank on one host (the same answer on every rank: the round's data alone). */
    static boolean oneHost(List<RankInfo> ranks) {
        return ranks.stream().allMatch(r -> r.sameHost(ranks.get(0)));
    }

    /** The groups the two-level engine runs over: the hosts where they are even, else every rank alone. */
    static HostLayout layout(RankInfo[] all, CclLog log) {
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
}
