package org.sparkccl.tools.launch;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * Starts N ranks as JVM processes on this host, as {@code mpirun -np N} does: same Java, same class
 * path, each with its rank, the group size, a rendezvous address (a free port on 127.0.0.1) and a
 * random job token in its environment (see {@link LaunchedRank}); {@code SPARKCCL_*} settings pass
 * through. Each rank gets its own {@code java.io.tmpdir}, because JCuda unpacks its native libraries
 * there and concurrent JVMs would race on the same files.
 *
 * <p>Output: rank 0's stdout is forwarded as is (the benchmark's table stays clean); other ranks'
 * stdout and every rank's stderr are forwarded with a {@code [rank r] } prefix.
 *
 * <p>Failure: when a rank exits non-zero or is killed, the launcher waits {@link #survivorGrace} for
 * the others to end by themselves, then stops them (SIGTERM, then SIGKILL after
 * {@link #terminateGrace}) and reports the first failure naming the rank. A shutdown hook kills every
 * rank if the launcher's own JVM goes down, and ranks exit by themselves when the launcher was
 * SIGKILLed (see {@link LaunchedRank#fromEnvironment()}), so no rank outlives it.
 *
 * <p>Use: {@code RankLauncher.of(4, Main.class.getName()).args("-x").run().requireSuccess();}
 */
public final class RankLauncher {
    private static final SecureRandom RANDOM = new SecureRandom();
    /** Every rank needs these: direct-buffer addresses and mappings need the opens (Agrona's export: see JdkAccess). */
    private static final List<String> REQUIRED_JVM_OPTIONS = List.of(
            "--add-opens=java.base/java.nio=ALL-UNNAMED",
            "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED");

    /** Called for every line a rank writes, from the thread that reads that rank's stream. */
    @FunctionalInterface
    public interface LineListener {
        void line(int rank, boolean stderr, String line);
    }

    private final int ranks;
    private final String mainClass;
    private final List<String> args = new ArrayList<>();
    private final List<String> jvmOptions = new ArrayList<>();
    private final Map<String, String> environment = new LinkedHashMap<>();
    private String classPath = System.getProperty("java.class.path");
    private String host = "127.0.0.1";
    private PrintStream out = System.out;
    private PrintStream err = System.err;
    private LineListener listener = (rank, stderr, line) -> { };
    private Duration survivorGrace = Duration.ZERO;
    private Duration terminateGrace = Duration.ofSeconds(3);
    private Duration timeout;
    private int tailLines = 200;

    private RankLauncher(int ranks, String mainClass) {
        if (ranks < 1) {
            throw new IllegalArgumentException("need at least 1 rank, got " + ranks);
        }
        this.ranks = ranks;
        this.mainClass = Objects.requireNonNull(mainClass, "mainClass");
    }

    /** A launch of {@code ranks} processes running {@code mainClass}. */
    public static RankLauncher of(int ranks, String mainClass) {
        return new RankLauncher(ranks, mainClass);
    }

    /** Arguments for every rank's main. */
    public RankLauncher args(String... more) {
        args.addAll(Arrays.asList(more));
        return this;
    }

    public RankLauncher args(List<String> more) {
        args.addAll(more);
        return this;
    }

    /** Extra JVM options for every rank (e.g. {@code -Xmx1g}). */
    public RankLauncher jvmOptions(String... options) {
        jvmOptions.addAll(Arrays.asList(options));
        return this;
    }

    /** Sets an environment variable for every rank; a null value removes an inherited one. */
    public RankLauncher env(String name, String value) {
        environment.put(name, value);
        return this;
    }

    /** The ranks' class path; this JVM's by default. */
    public RankLauncher classPath(String path) {
        this.classPath = Objects.requireNonNull(path);
        return this;
    }

    /** The address rank 0 listens on; 127.0.0.1 by default. */
    public RankLauncher host(String address) {
        this.host = Objects.requireNonNull(address);
        return this;
    }

    /** Where the ranks' stdout and stderr are forwarded; null drops them (the listener still sees them). */
    public RankLauncher output(PrintStream stdout, PrintStream stderr) {
        this.out = stdout;
        this.err = stderr;
        return this;
    }

    public RankLauncher onLine(LineListener lineListener) {
        this.listener = Objects.requireNonNull(lineListener);
        return this;
    }

    /**
     * After the first rank fails, how long the others may take to end by themselves (to report the
     * failure in their own words) before they are stopped. Zero by default, as mpirun.
     */
    public RankLauncher survivorGrace(Duration grace) {
        this.survivorGrace = Objects.requireNonNull(grace);
        return this;
    }

    /** Between SIGTERM and SIGKILL when stopping ranks; 3 s by default. */
    public RankLauncher terminateGrace(Duration grace) {
        this.terminateGrace = Objects.requireNonNull(grace);
        return this;
    }

    /** Stops every rank and fails the launch when it runs longer than this; no limit by default. */
    public RankLauncher timeout(Duration limit) {
        this.timeout = limit;
        return this;
    }

    /** How many of each rank's last output lines the result keeps. */
    public RankLauncher tailLines(int lines) {
        this.tailLines = lines;
        return this;
    }

    /** Starts the ranks and waits until all have ended; never leaves one running. */
    public LaunchResult run() {
        Path tmpRoot = createTempRoot();
        List<Process> processes = new ArrayList<>();
        List<Thread> pumps = new ArrayList<>();
        List<ArrayDeque<String>> tails = new ArrayList<>();
        Thread hook = new Thread(() -> killForcibly(processes), "sparkccl-launcher-shutdown");
        Runtime.getRuntime().addShutdownHook(hook);
        try {
            String rendezvous = host + ":" + freePort(host);
            String token = HexFormat.of().formatHex(randomBytes(16));
            BlockingQueue<Integer> exits = new LinkedBlockingQueue<>();
            for (int r = 0; r < ranks; r++) {
                ArrayDeque<String> tail = new ArrayDeque<>();
                tails.add(tail);
                Process p = start(r, rendezvous, token, tmpRoot);
                synchronized (processes) {
                    processes.add(p);
                }
                pumps.add(pump(r, false, p.getInputStream(), tail));
                pumps.add(pump(r, true, p.getErrorStream(), tail));
                int rank = r;
                p.onExit().thenRun(() -> exits.add(rank));
            }
            long[] pids = processes.stream().mapToLong(Process::pid).toArray();
            Failure failure = awaitFirstFailure(processes, exits);
            if (failure != null) {
                stop(processes);
            }
            joinPumps(pumps);
            int[] codes = new int[ranks];
            List<List<String>> tailCopies = new ArrayList<>();
            for (int r = 0; r < ranks; r++) {
                Process p = processes.get(r);
                codes[r] = p.isAlive() ? -1 : p.exitValue();
                synchronized (tails.get(r)) {
                    tailCopies.add(Collections.unmodifiableList(new ArrayList<>(tails.get(r))));
                }
            }
            return new LaunchResult(pids, codes, tailCopies,
                    failure == null ? -1 : failure.rank, failure == null ? null : failure.message);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while waiting for the ranks; they were killed", e);
        } finally {
            killForcibly(processes);
            try {
                Runtime.getRuntime().removeShutdownHook(hook);
            } catch (IllegalStateException e) {
                // The JVM is shutting down: the hook is running or has run.
            }
            deleteRecursively(tmpRoot);
        }
    }

    private static final class Failure {
        final int rank;
        final String message;

        Failure(int rank, String message) {
            this.rank = rank;
            this.message = message;
        }
    }

    /** Waits until every rank exited with 0 (null), or one failed, or the launch timed out. */
    private Failure awaitFirstFailure(List<Process> processes, BlockingQueue<Integer> exits) throws InterruptedException {
        long deadline = timeout == null ? Long.MAX_VALUE : System.nanoTime() + timeout.toNanos();
        int running = ranks;
        while (running > 0) {
            Integer rank = timeout == null ? exits.take()
                    : exits.poll(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
            if (rank == null) {
                List<Integer> alive = new ArrayList<>();
                for (int r = 0; r < ranks; r++) {
                    if (processes.get(r).isAlive()) {
                        alive.add(r);
                    }
                }
                return new Failure(-1, "the launch timed out after " + timeout.toSeconds() + " s with ranks " + alive
                        + " still running; they were stopped");
            }
            running--;
            Process p = processes.get(rank);
            int code = p.exitValue();
            if (code != 0) {
                return new Failure(rank, "rank " + rank + " (pid " + p.pid() + ") " + LaunchResult.describeExit(code)
                        + (ranks > 1 ? "; the other ranks were stopped" : ""));
            }
        }
        return null;
    }

    /** The others get {@link #survivorGrace} to end, then SIGTERM, then SIGKILL. */
    private void stop(List<Process> processes) throws InterruptedException {
        awaitExit(processes, survivorGrace);
        for (Process p : processes) {
            if (p.isAlive()) {
                p.descendants().forEach(ProcessHandle::destroy);
                p.destroy();
            }
        }
        awaitExit(processes, terminateGrace);
        killForcibly(processes);
        awaitExit(processes, Duration.ofSeconds(5));
    }

    private static void awaitExit(List<Process> processes, Duration limit) throws InterruptedException {
        long deadline = System.nanoTime() + limit.toNanos();
        for (Process p : processes) {
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                return;
            }
            p.waitFor(left, TimeUnit.NANOSECONDS);
        }
    }

    private static void killForcibly(List<Process> processes) {
        synchronized (processes) {
            for (Process p : processes) {
                if (p.isAlive()) {
                    p.descendants().forEach(ProcessHandle::destroyForcibly);
                    p.destroyForcibly();
                }
            }
        }
    }

    private Process start(int rank, String rendezvous, String token, Path tmpRoot) {
        Path tmp = tmpRoot.resolve("rank-" + rank);
        List<String> command = new ArrayList<>();
        command.add(Paths.get(System.getProperty("java.home"), "bin", "java").toString());
        command.addAll(REQUIRED_JVM_OPTIONS);
        command.add("-Djava.io.tmpdir=" + tmp);
        command.addAll(jvmOptions);
        command.add("-cp");
        command.add(classPath);
        command.add(mainClass);
        command.addAll(args);
        ProcessBuilder builder = new ProcessBuilder(command);
        Map<String, String> env = builder.environment();
        env.keySet().removeIf(k -> k.startsWith("CCL_LAUNCH_"));
        for (Map.Entry<String, String> e : environment.entrySet()) {
            if (e.getValue() == null) {
                env.remove(e.getKey());
            } else {
                env.put(e.getKey(), e.getValue());
            }
        }
        env.put(LaunchedRank.ENV_RANK, Integer.toString(rank));
        env.put(LaunchedRank.ENV_SIZE, Integer.toString(ranks));
        env.put(LaunchedRank.ENV_RENDEZVOUS, rendezvous);
        env.put(LaunchedRank.ENV_TOKEN, token);
        env.put(LaunchedRank.ENV_PARENT_PID, Long.toString(ProcessHandle.current().pid()));
        try {
            Files.createDirectories(tmp);
            return builder.start();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot start rank " + rank + " (" + command.get(0) + "): " + e.getMessage(), e);
        }
    }

    private Thread pump(int rank, boolean stderr, InputStream stream, ArrayDeque<String> tail) {
        PrintStream sink = stderr ? err : out;
        String prefix = !stderr && rank == 0 ? "" : "[rank " + rank + "] ";
        Thread t = new Thread(() -> {
            try (BufferedReader reader = new BufferedReader(new InputStreamReader(stream, StandardCharsets.UTF_8))) {
                String line;
                while ((line = reader.readLine()) != null) {
                    synchronized (tail) {
                        tail.addLast(line);
                        if (tail.size() > tailLines) {
                            tail.removeFirst();
                        }
                    }
                    listener.line(rank, stderr, line);
                    if (sink != null) {
                        sink.println(prefix + line);
                    }
                }
            } catch (IOException e) {
                // The rank is gone and its pipe with it.
            }
        }, "sparkccl-launcher-rank-" + rank + (stderr ? "-err" : "-out"));
        t.setDaemon(true);
        t.start();
        return t;
    }

    /** Output still in the pipes is forwarded; a rank's orphaned child holding a pipe open cannot block us long. */
    private static void joinPumps(List<Thread> pumps) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        for (Thread t : pumps) {
            t.join(Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime())));
        }
    }

    private static int freePort(String host) {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getByName(host))) {
            return s.getLocalPort();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot find a free port on " + host + " for the rendezvous: " + e, e);
        }
    }

    private static byte[] randomBytes(int n) {
        byte[] b = new byte[n];
        RANDOM.nextBytes(b);
        return b;
    }

    private static Path createTempRoot() {
        try {
            return Files.createTempDirectory("sparkccl-launch-");
        } catch (IOException e) {
            throw new UncheckedIOException("cannot create a temporary folder for the ranks: " + e, e);
        }
    }

    private static void deleteRecursively(Path root) {
        try (Stream<Path> paths = Files.walk(root)) {
            paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (IOException | UncheckedIOException e) {
            // Best effort: a leftover temp folder is harmless.
        }
    }
}
