package org.sparkccl.tools.launch;

import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import org.sparkccl.core.bootstrap.TcpBootstrap;

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
    /** The launcher's pid: a rank whose launcher is gone (even SIGKILLed) exits instead of living on as an orphan. */
    public static final String ENV_PARENT_PID = "CCL_LAUNCH_PARENT_PID";
    private static final long WATCH_INTERVAL_MS = 500;
    private static final AtomicBoolean WATCHING = new AtomicBoolean();

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

    /** Where this rank stands; also starts watching the launcher, so that this rank ends when it does. */
    public static LaunchedRank fromEnvironment() {
        LaunchedRank me = fromEnvironment(System.getenv());
        String parent = System.getenv(ENV_PARENT_PID);
        if (parent != null && WATCHING.compareAndSet(false, true)) {
            watchLauncher(me.rank, Long.parseLong(parent));
        }
        return me;
    }

    /**
     * The launcher kills its ranks when it ends, unless it is killed itself with SIGKILL; then the
     * ranks notice that they have a new parent (the pid cannot be reused while we are its child) and
     * exit, so none is left behind holding memory and spinning on a core.
     */
    private static void watchLauncher(int rank, long launcherPid) {
        Thread watchdog = new Thread(() -> {
            while (true) {
                long parent = ProcessHandle.current().parent().map(ProcessHandle::pid).orElse(-1L);
                if (parent != launcherPid) {
                    System.err.println("rank " + rank + ": the launcher (pid " + launcherPid + ") is gone; exiting so"
                            + " that no rank is left behind");
                    Thread halt = new Thread(() -> {
                        sleepQuietly(5_000);
                        Runtime.getRuntime().halt(1); // a shutdown hook hangs: leave anyway
                    });
                    halt.setDaemon(true);
                    halt.start();
                    System.exit(1);
                }
                sleepQuietly(WATCH_INTERVAL_MS);
            }
        }, "sparkccl-launcher-watchdog");
        watchdog.setDaemon(true);
        watchdog.start();
    }

    private static void sleepQuietly(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
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
