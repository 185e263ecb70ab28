package org.sparkccl.ipc.launch;

import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.Map;
import org.sparkccl.core.TcpBootstrap;

/**
 * The child side of {@link RankLauncher}: where this process stands in the group, read from the
 * environment the launcher set (as {@code OMPI_COMM_WORLD_RANK} under mpirun). These variables are
 * the launcher's, not sparkccl parameters, hence their own prefix.
 */
public final class LaunchedRank {
    public static final String ENV_RANK = "CCL_LAUNCH_RANK";
    public static final String ENV_SIZE = "CCL_LAUNCH_SIZE";
    /** {@code host:port} where rank 0 listens for the bootstrap. */
    public static final String ENV_RENDEZVOUS = "CCL_LAUNCH_RENDEZVOUS";
    /** A random token per launch, so that ranks of two launches never join each other's group. */
    public static final String ENV_TOKEN = "CCL_LAUNCH_TOKEN";

    private final int rank;
    private final int size;
    private final InetSocketAddress rendezvous;
    private final String token;

    LaunchedRank(int rank, int size, InetSocketAddress rendezvous, String token) {
        this.rank = rank;
        this.size = size;
        this.rendezvous = rendezvous;
        this.token = token;
    }

    /** True in a process that {@link RankLauncher} started. */
    public static boolean isLaunched() {
        return System.getenv(ENV_RANK) != null;
    }

    public static LaunchedRank fromEnvironment() {
        return fromEnvironment(System.getenv());
    }

    static LaunchedRank fromEnvironment(Map<String, String> env) {
        String rank = env.get(ENV_RANK);
        String size = env.get(ENV_SIZE);
        String rendezvous = env.get(ENV_RENDEZVOUS);
        if (rank == null || size == null || rendezvous == null) {
            throw new IllegalStateException("this process was not started by RankLauncher (" + ENV_RANK + ", "
                    + ENV_SIZE + " and " + ENV_RENDEZVOUS + " are not all set); start it through bin/allreduce-perf "
                    + "or RankLauncher");
        }
        int colon = rendezvous.lastIndexOf(':');
        if (colon <= 0) {
            throw new IllegalStateException(ENV_RENDEZVOUS + "='" + rendezvous + "' is not host:port");
        }
        InetSocketAddress address = new InetSocketAddress(rendezvous.substring(0, colon),
                Integer.parseInt(rendezvous.substring(colon + 1)));
        return new LaunchedRank(Integer.parseInt(rank), Integer.parseInt(size), address,
                env.getOrDefault(ENV_TOKEN, ""));
    }

    public int rank() {
        return rank;
    }

    public int size() {
        return size;
    }

    public InetSocketAddress rendezvous() {
        return rendezvous;
    }

    /** Joins the group: the bootstrap every communicator of this launch is built from. */
    public TcpBootstrap bootstrap(Duration timeout) {
        return TcpBootstrap.connect(rendezvous, rank, size, timeout, token);
    }

    @Override
    public String toString() {
        return "rank " + rank + " of " + size + " (rendezvous " + rendezvous + ")";
    }
}
