package org.sparkccl.tools.launch;

import java.time.Duration;
import java.util.Arrays;
import org.sparkccl.core.bootstrap.TcpBootstrap;

/**
 * A rank for {@link RankLauncherTest}. Modes:
 * {@code gather} (join the bootstrap, print what the rank sees, exit 0),
 * {@code exit R CODE} (rank R exits with CODE, the others wait forever),
 * {@code sigkill R} (rank R kills itself with SIGKILL, the others wait forever),
 * {@code stubborn R} (rank R exits 3; the others ignore SIGTERM by hanging in a shutdown hook),
 * {@code launch N} (not a rank: a launcher of N ranks that wait forever, for tests that kill it).
 */
public final class LauncherProbe {
    private LauncherProbe() {
    }

    public static void main(String[] args) throws Exception {
        if (args[0].equals("launch")) {
            RankLauncher.of(Integer.parseInt(args[1]), LauncherProbe.class.getName()).args("exit", "99", "1").run();
            return;
        }
        LaunchedRank me = LaunchedRank.fromEnvironment();
        switch (args[0]) {
            case "gather":
                try (TcpBootstrap b = me.bootstrap(Duration.ofSeconds(60))) {
                    byte[][] all = b.allGather(new byte[] {(byte) me.rank()});
                    int[] ranks = new int[all.length];
                    for (int i = 0; i < all.length; i++) {
                        ranks[i] = all[i][0];
                    }
                    System.out.println("rank " + me.rank() + " of " + me.size() + " gathered " + Arrays.toString(ranks)
                            + " proto=" + System.getenv("SPARKCCL_PROTO")
                            + " tmpdir=" + System.getProperty("java.io.tmpdir"));
                    System.err.println("a line on stderr");
                }
                return;
            case "exit":
                if (me.rank() == Integer.parseInt(args[1])) {
                    Thread.sleep(300);
                    System.err.println("exiting with " + args[2]);
                    System.exit(Integer.parseInt(args[2]));
                }
                break;
            case "sigkill":
                if (me.rank() == Integer.parseInt(args[1])) {
                    Thread.sleep(300);
                    new ProcessBuilder("kill", "-KILL", Long.toString(ProcessHandle.current().pid())).start().waitFor();
                }
                break;
            case "stubborn":
                if (me.rank() != Integer.parseInt(args[1])) {
                    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                        try {
                            Thread.sleep(600_000);
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                        }
                    }));
                }
                // Every hook is in place before the failing rank goes.
                try (TcpBootstrap b = me.bootstrap(Duration.ofSeconds(60))) {
                    b.barrier();
                }
                if (me.rank() == Integer.parseInt(args[1])) {
                    System.exit(3);
                }
                break;
            default:
                throw new IllegalArgumentException("unknown mode " + args[0]);
        }
        System.out.println("ready");
        Thread.sleep(600_000);
    }
}
