package org.sparkccl.core.net;

import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import org.sparkccl.core.CclException;
import org.sparkccl.core.transport.RankInfo;

/**
 * What the socket transport puts into a rank's description for the bootstrap round: the address it
 * listens on and its share of the communicator's secret.
 */
public final class NetRound {
    static final String ENTRY_ADDRESS = "net.address";
    static final String ENTRY_SECRET_SHARE = "net.share";
    static final String ENTRY_CORES = "net.cores";

    private NetRound() {
    }

    /** {@code info} with this listener's address and a fresh secret share. */
    public static RankInfo describe(RankInfo info, SocketListener listener) {
        InetSocketAddress a = listener.address();
        return info.withEntry(ENTRY_ADDRESS, (a.getAddress().getHostAddress() + " " + a.getPort())
                        .getBytes(StandardCharsets.UTF_8))
                .withEntry(ENTRY_SECRET_SHARE, SocketListener.newSecretShare())
                .withEntry(ENTRY_CORES, Integer.toString(Runtime.getRuntime().availableProcessors())
                        .getBytes(StandardCharsets.UTF_8));
    }

    /**
     * Whether every host of {@code all} has a core for each of its ranks and each of their {@code
     * connections} writer threads, so that a step's pieces on several links can be written in
     * parallel. Every rank computes the same answer from the same round (the pieces' sizes depend
     * on it); a rank of an older build, which sends no core count, makes it false.
     */
    static boolean coresForParallelLinks(RankInfo[] all, int connections) {
        for (RankInfo info : all) {
            byte[] cores = info.entry(ENTRY_CORES);
            if (cores == null) {
                return false;
            }
            if (Integer.parseInt(new String(cores, StandardCharsets.UTF_8)) < info.ranksOnHost(all) * (1 + connections)) {
                return false;
            }
        }
        return true;
    }

    /** Every rank's secret share, in rank order, for {@link SocketListener#start}. */
    public static byte[][] secretShares(RankInfo[] all) {
        byte[][] shares = new byte[all.length][];
        for (int r = 0; r < all.length; r++) {
            shares[r] = required(all[r], ENTRY_SECRET_SHARE);
        }
        return shares;
    }

    static InetSocketAddress address(RankInfo info) {
        String[] hostPort = new String(required(info, ENTRY_ADDRESS), StandardCharsets.UTF_8).split(" ");
        return new InetSocketAddress(hostPort[0], Integer.parseInt(hostPort[1]));
    }

    private static byte[] required(RankInfo info, String key) {
        byte[] v = info.entry(key);
        if (v == null) {
            throw new CclException("rank " + info.rank() + " sent no socket-transport " + key + "; run the same"
                    + " sparkccl build on every executor");
        }
        return v;
    }
}
