package org.sparkccl.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.apache.spark.launcher.JavaModuleOptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A real spark-submit of the application jar ({@code sparkccl-spark-app-*.jar}, built in the package
 * phase) to a real standalone cluster: a Master and a Worker, each its own JVM started as Spark's
 * scripts start them, from a Spark home under target/ whose jars/ is a Spark 4.2 distribution's
 * (spark-core, spark-sql and their runtime dependencies, linked from the local repository; no
 * sparkccl, Agrona, picocli, JNA or JCuda: only the application jar carries those). The worker offers
 * 2 fake GPUs (a discovery script prints addresses 0 and 1; there is no CUDA here, so the ranks work
 * in host memory); the driver is {@code SparkSubmit} in its own JVM with Spark's class path and
 * Spark's module options only, and TrainJob trains the bundled digits MLP on 2 ranks in the
 * worker's executor. The test checks the exit code, the loss curve rank 0 logs in the executor, the
 * driver's summary, and that the executor loaded the plugin and ran both ranks. The other tests run a
 * cluster of two hosts: two network namespaces where this machine can make them, else two Workers that
 * pretend; one of the two runs.
 */
class StandaloneClusterIT {
    private static final int STEPS = 60;
    private static final int LOG_EVERY = 10;
    private static final long MASTER_START_S = 60;
    private static final long WORKER_REGISTER_S = 60;
    private static final long SUBMIT_S = 150;
    private static final Pattern RANK_READY = Pattern.compile("sparkccl rank (\\d+) of 2 ready on .*? GPU (\\d+),");
    private static final Pattern STEP_LINE = Pattern.compile("step (\\d+)/(\\d+)\\s+loss ([0-9.]+)");
    private static final Pattern SUMMARY = Pattern.compile("trained steps (\\d+)\\.\\.(\\d+): last minibatch loss ([0-9.]+);"
            + " whole training set: loss ([0-9.]+), accuracy ([0-9.]+); ([0-9.]+) samples/s");

    private static final ClusterHost LOCAL = ClusterHost.thisMachine();
    private static final Pattern SOCKET_CHANNEL = Pattern.compile(
            "Channel (\\d+) : \\d+\\[\\d+\\] -> \\d+\\[\\d+\\] via NET/Socket \\(\\d+ connection\\(s\\) to [^/\\s]*/([^:\\s]+):\\d+");

    private final List<Process> daemons = new ArrayList<>();
    private Path home;

    @Test
    @Timeout(value = 6, unit = TimeUnit.MINUTES)
    void sparkSubmitOfTheApplicationJarTrainsOnAStandaloneCluster() throws Exception {
        Path appJar = Paths.get(System.getProperty("sparkccl.appJar", "target/sparkccl-spark-app.jar"));
        assertTrue(Files.isRegularFile(appJar), "the application jar is built in the package phase: " + appJar);
        home = Paths.get(System.getProperty("sparkccl.standaloneHome", "target/spark-standalone")).toAbsolutePath();
        long started = System.nanoTime();
        Process driver = null;
        try {
            sparkHome(Paths.get(System.getProperty("sparkccl.sparkDistClasspath")));
            Path script = fakeGpuScript(2);
            Path workerConf = home.resolve("conf/worker.conf");
            Files.writeString(workerConf, "spark.worker.resource.gpu.amount 2\n"
                    + "spark.worker.resource.gpu.discoveryScript " + script + "\n");

            Process master = start("master", "org.apache.spark.deploy.master.Master",
                    "--host", "127.0.0.1", "--port", "0", "--webui-port", "0");
            Matcher url = awaitLog("master", master, masterUrl(LOCAL), MASTER_START_S);
            String masterUrl = url.group();
            Process worker = start("worker", "org.apache.spark.deploy.worker.Worker", masterUrl,
                    "--host", "127.0.0.1", "--webui-port", "0", "--cores", "4", "--memory", "4g",
                    "--work-dir", home.resolve("work").toString(), "--properties-file", workerConf.toString());
            awaitLog("worker", worker, Pattern.compile("Successfully registered with master"), WORKER_REGISTER_S);
            double clusterUpS = (System.nanoTime() - started) / 1e9;

            long submitted = System.nanoTime();
            driver = launch("driver", "-Xmx1g", "org.apache.spark.deploy.SparkSubmit",
                    "--master", masterUrl, "--deploy-mode", "client",
                    "--class", "org.sparkccl.train.TrainJob",
                    "--conf", "spark.plugins=org.sparkccl.spark.SparkCclPlugin",
                    "--conf", "spark.executor.resource.gpu.amount=2",
                    "--conf", "spark.executor.resource.gpu.discoveryScript=" + script,
                    "--conf", "spark.task.resource.gpu.amount=1",
                    "--conf", "spark.executor.cores=2",
                    "--conf", "spark.cores.max=2",
                    "--conf", "spark.executor.memory=1g",
                    // Short-lived JVMs on a small machine: C1 only and the serial collector start faster.
                    "--conf", "spark.executor.extraJavaOptions=-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
                    "--conf", "spark.ui.enabled=false",
                    "--conf", "spark.driver.host=127.0.0.1",
                    "--conf", "spark.sql.shuffle.partitions=2",
                    "--conf", "spark.scheduler.barrier.maxConcurrentTasksCheck.interval=1s",
                    "--conf", "spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures=120",
                    "--conf", "spark.sparkccl.timeoutMs=120000",
                    appJar.toString(),
                    "--ranks", "2", "--steps", Integer.toString(STEPS), "--log-every", Integer.toString(LOG_EVERY));
            boolean ended = driver.waitFor(SUBMIT_S, TimeUnit.SECONDS);
            double submitS = (System.nanoTime() - submitted) / 1e9;
            if (!ended) {
                fail("spark-submit did not end within " + SUBMIT_S + " s" + logs());
            }
            assertEquals(0, driver.exitValue(), "spark-submit's exit code" + logs());

            String driverOut = Files.readString(home.resolve("logs/driver.log"));
            Matcher summary = SUMMARY.matcher(driverOut);
            assertTrue(summary.find(), "TrainJob's summary line in the driver's output" + logs());
            assertTrue(driverOut.contains("Initialized driver component for plugin " + SparkCclPlugin.class.getName()),
                    "the driver loaded the plugin from the application jar" + logs());

            String executor = executorLogs();
            assertTrue(executor.contains("sparkccl-spark-app"), "the executor fetched the application jar" + logs());
            assertTrue(executor.contains("Initialized executor component for plugin " + SparkCclPlugin.class.getName()),
                    "the executor loaded the plugin from the application jar" + logs());
            Set<String> gpus = new TreeSet<>();
            Matcher ready = RANK_READY.matcher(executor);
            while (ready.find()) {
                gpus.add(ready.group(1) + "->GPU " + ready.group(2));
            }
            assertEquals(Set.of("0->GPU 0", "1->GPU 1"), gpus,
                    "both ranks ran in the worker's executor, each on a GPU address the worker gave it" + logs());
            for (int rank = 0; rank < 2; rank++) {
                assertTrue(executor.contains("rank " + rank + ": training steps run on the CPU"),
                        "rank " + rank + " trained in the worker's executor" + logs());
            }
            List<double[]> curve = new ArrayList<>();
            Matcher step = STEP_LINE.matcher(executor);
            while (step.find()) {
                curve.add(new double[] {Integer.parseInt(step.group(1)), Double.parseDouble(step.group(3))});
            }
            assertEquals(STEPS / LOG_EVERY, curve.size(), "rank 0 logs a loss every " + LOG_EVERY + " steps" + logs());
            double first = curve.get(0)[1];
            double last = curve.get(curve.size() - 1)[1];
            double finalLoss = Double.parseDouble(summary.group(4));
            double accuracy = Double.parseDouble(summary.group(5));
            String numbers = String.format(Locale.ROOT, "cluster up %.1f s, spark-submit %.1f s; loss at steps %s;"
                    + " whole set loss %.4f accuracy %.4f; %s samples/s", clusterUpS, submitS,
                    curve.stream().map(p -> String.format(Locale.ROOT, "%d %.4f", (int) p[0], p[1]))
                            .collect(Collectors.joining(", ")), finalLoss, accuracy, summary.group(6));
            System.out.println("StandaloneClusterIT: " + numbers);
            assertEquals(Double.parseDouble(summary.group(3)), last, 1e-4, "the driver's last loss is rank 0's");
            assertTrue(last < 0.5 * first, "the loss must fall: " + numbers + logs());
            assertTrue(finalLoss < first, "the whole set's loss is below the first minibatch's: " + numbers);
            assertTrue(accuracy > 0.8, "the model learned the digits: " + numbers);
        } finally {
            if (driver != null) {
                stop(driver);
            }
            for (int i = daemons.size() - 1; i >= 0; i--) {
                stop(daemons.get(i));
            }
        }
    }

    /**
     * Two pretend hosts (SPARKCCL_HOST_ID in each Worker's environment, which its executors inherit),
     * all on 127.0.0.1: where this machine cannot make network namespaces (not root), so that the
     * two-host cluster runs everywhere. Where it can, the namespace test below replaces this one.
     */
    @Test
    @Timeout(value = 8, unit = TimeUnit.MINUTES)
    void twoPretendHostsOfTwoExecutorsUseTcpAcrossAndSharedMemoryInside() throws Exception {
        assumeTrue(NetworkNamespaceHosts.unavailableReason().isPresent(),
                "this machine makes network namespaces: the two hosts run as"
                + " namespaces instead (twoNetworkNamespacesOfTwoExecutorsUseTheVethAcrossAndSharedMemoryInside)");
        twoHostsOfTwoExecutors("-two-hosts", List.of(ClusterHost.pretend("host-a"), ClusterHost.pretend("host-b")));
    }

    /**
     * Two hosts as two network namespaces (NetworkNamespaceHosts: a veth pair between them, each host
     * its own host name, no SPARKCCL_HOST_ID): the Master, host-a's Worker and the driver in one,
     * host-b's Worker in the other, every Spark process bound to its namespace's address. No route
     * joins either namespace to this machine's own network, so all that crosses between the hosts
     * goes over the veth.
     */
    @Test
    @Timeout(value = 8, unit = TimeUnit.MINUTES)
    void twoNetworkNamespacesOfTwoExecutorsUseTheVethAcrossAndSharedMemoryInside() throws Exception {
        Optional<String> unavailable = NetworkNamespaceHosts.unavailableReason();
        assumeTrue(unavailable.isEmpty(), () -> "cannot make network namespaces here (" + unavailable.orElse("")
                + "): the pretend hosts run instead");
        try (NetworkNamespaceHosts namespaces = NetworkNamespaceHosts.create()) {
            twoHostsOfTwoExecutors("-namespaces", namespaces.hosts());
        }
    }

    /**
     * A Master, a Worker on each host with two executors of one core, and one application on the
     * first host (the Master's): the collective check and TrainJob run in 4-rank barrier stages
     * whose ranks span the hosts, so the engine is two-level: shared memory between the two executors
     * of a host, TCP between the hosts. The executors' INFO logs show both hops, every rank's host
     * id, and that each host's ranks connect across to the other host's address.
     */
    private void twoHostsOfTwoExecutors(String homeSuffix, List<ClusterHost> hosts) throws Exception {
        Path appJar = Paths.get(System.getProperty("sparkccl.appJar", "target/sparkccl-spark-app.jar"));
        home = Paths.get(System.getProperty("sparkccl.standaloneHome", "target/spark-standalone") + homeSuffix)
                .toAbsolutePath();
        ClusterHost first = hosts.get(0);
        long started = System.nanoTime();
        try {
            sparkHome(Paths.get(System.getProperty("sparkccl.sparkDistClasspath")));
            Process master = start("master", first, Map.of(), "org.apache.spark.deploy.master.Master",
                    "--host", first.address(), "--port", "0", "--webui-port", "0");
            String masterUrl = awaitLog("master", master, masterUrl(first), MASTER_START_S).group();
            for (ClusterHost host : hosts) {
                String name = "worker-" + host.name();
                Process worker = start(name, host, host.workerEnvironment(), "org.apache.spark.deploy.worker.Worker",
                        masterUrl, "--host", host.address(), "--webui-port", "0", "--cores", "2", "--memory", "2g",
                        "--work-dir", home.resolve("work/" + host.name()).toString());
                awaitLog(name, worker, Pattern.compile("Successfully registered with master"), WORKER_REGISTER_S);
            }
            double clusterUpS = (System.nanoTime() - started) / 1e9;
            // No spark.sparkccl.socketAddress: each rank listens on its executor's Spark host.
            String[] cluster = {"--master", masterUrl, "--deploy-mode", "client",
                "--conf", "spark.plugins=org.sparkccl.spark.SparkCclPlugin",
                "--conf", "spark.executor.cores=1",
                "--conf", "spark.cores.max=4",
                "--conf", "spark.executor.memory=512m",
                "--conf", "spark.executor.extraJavaOptions=-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
                "--conf", "spark.ui.enabled=false",
                "--conf", "spark.driver.host=" + first.address(),
                "--conf", "spark.sql.shuffle.partitions=4",
                "--conf", "spark.scheduler.barrier.maxConcurrentTasksCheck.interval=1s",
                "--conf", "spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures=120",
                "--conf", "spark.sparkccl.timeoutMs=120000",
                "--conf", "spark.sparkccl.debug=INFO",
                "--conf", "spark.sparkccl.debugSubsys=INIT,NET"};

            // One application (one set of executors to start): the check, then TrainJob as it is.
            long submitted = System.nanoTime();
            String driver = submit("check-and-train", first, cluster, "org.sparkccl.tools.spark.SparkCollectiveCheck",
                    appJar, "--ranks", "4", "--", "--ranks", "4", "--steps", "30", "--log-every", "10", "--reference");
            double submitS = (System.nanoTime() - submitted) / 1e9;
            Matcher total = Pattern.compile("collective check: 4 ranks, (\\d+) cases each, (\\d+) wrong elements").matcher(driver);
            assertTrue(total.find(), "the check's total line" + logs("check-and-train"));
            assertEquals("0", total.group(2), "wrong elements" + logs("check-and-train"));

            String executor = executorLogs();
            assertTrue(executor.contains("two-level (shared memory inside a host, TCP across)"), "two-level" + logs());
            // The ranks' "ready" line names the layout, not only the engine.
            assertTrue(executor.contains("; two-level: 2 hosts x 2 ranks, SHM inside, TCP across"),
                    "the ready line's layout" + logs());
            assertTrue(Pattern.compile("Channel \\d+ : \\d+\\[\\d+\\] -> \\d+\\[\\d+\\] via SHM").matcher(executor).find(),
                    "the hop inside a host is shared memory" + logs());
            for (ClusterHost host : hosts) {
                String onHost = executorLogs(home.resolve("work/" + host.name()));
                assertTrue(onHost.contains(host.hostId()), "ranks ran on " + host.hostId() + logs());
                // Every TCP link of this host's ranks goes to an address of the cluster, and the
                // cross-host ring's (tag 2) to the other host's address.
                Set<String> across = new TreeSet<>();
                Matcher link = SOCKET_CHANNEL.matcher(onHost);
                while (link.find()) {
                    String to = link.group(2);
                    assertTrue(hosts.stream().anyMatch(h -> h.address().equals(to)), "a link to " + to + logs());
                    if (Integer.parseInt(link.group(1)) == 2) {
                        across.add(to);
                    }
                }
                ClusterHost other = hosts.get(1 - hosts.indexOf(host));
                assertEquals(Set.of(other.address()), across,
                        "the TCP hop from " + host.name() + " goes to " + other.name() + "'s address" + logs());
            }

            Matcher reference = Pattern.compile("largest relative loss difference over (\\d+) steps: ([0-9.eE+-]+)")
                    .matcher(driver);
            assertTrue(reference.find(), "TrainJob's reference line" + logs("check-and-train"));
            double diff = Double.parseDouble(reference.group(2));
            System.out.printf(Locale.ROOT, "StandaloneClusterIT two hosts (%s): cluster up %.1f s, spark-submit %.1f s;"
                    + " %s cases per rank, 0 wrong; TrainJob against one process: largest relative loss difference %s%n",
                    hosts.stream().map(h -> h.hostId() + " at " + h.address()).collect(Collectors.joining(", ")),
                    clusterUpS, submitS, total.group(1), diff);
            assertTrue(diff < 1e-4, "distributed and single-process loss curves differ by " + diff);
        } finally {
            for (int i = daemons.size() - 1; i >= 0; i--) {
                stop(daemons.get(i));
            }
            daemons.clear();
        }
    }

    private static Pattern masterUrl(ClusterHost host) {
        return Pattern.compile("spark://" + Pattern.quote(host.address()) + ":(\\d+)");
    }

    /** spark-submit of {@code mainClass} from the application jar; returns the driver's output once it ended well. */
    private String submit(String name, ClusterHost host, String[] cluster, String mainClass, Path appJar, String... args)
            throws Exception {
        List<String> command = new ArrayList<>(List.of("-Xmx1g", "org.apache.spark.deploy.SparkSubmit"));
        command.addAll(Arrays.asList(cluster));
        command.addAll(List.of("--class", mainClass, appJar.toString()));
        command.addAll(Arrays.asList(args));
        Process driver = launch(name, host, Map.of(), command.toArray(new String[0]));
        try {
            if (!driver.waitFor(2 * SUBMIT_S, TimeUnit.SECONDS)) {
                fail(name + ": spark-submit did not end within " + 2 * SUBMIT_S + " s" + logs(name));
            }
            assertEquals(0, driver.exitValue(), name + ": spark-submit's exit code" + logs(name));
            return Files.readString(home.resolve("logs/" + name + ".log"));
        } finally {
            stop(driver);
        }
    }

    /** SPARK_HOME as a distribution lays it out: jars/ (links to the local repository's jars), conf/, RELEASE. */
    private void sparkHome(Path classpathFile) throws IOException {
        if (Files.exists(home)) {
            try (Stream<Path> all = Files.walk(home)) {
                for (Path p : all.sorted(Comparator.reverseOrder()).collect(Collectors.toList())) {
                    Files.delete(p);
                }
            }
        }
        Path jars = Files.createDirectories(home.resolve("jars"));
        Files.createDirectories(home.resolve("conf"));
        Files.createDirectories(home.resolve("logs"));
        Files.createDirectories(home.resolve("work"));
        Files.writeString(home.resolve("RELEASE"), "Spark 4.2.0 (jars from the local Maven repository)\n");
        String classpath = Files.readString(classpathFile).trim();
        for (String entry : classpath.split(File.pathSeparator)) {
            Path jar = Paths.get(entry);
            String name = jar.getFileName().toString();
            assertTrue(!name.startsWith("agrona") && !name.startsWith("picocli") && !name.startsWith("jna")
                    && !name.startsWith("jcuda") && !name.startsWith("jfreechart"), "the Spark home must not have " + name);
            Files.createSymbolicLink(jars.resolve(name), jar);
        }
    }

    private Path fakeGpuScript(int gpus) throws IOException {
        Path script = home.resolve("fake-gpus.sh");
        String addresses = Stream.iterate(0, g -> g + 1).limit(gpus).map(g -> "\"" + g + "\"")
                .collect(Collectors.joining(","));
        Files.writeString(script, "#!/bin/sh\necho '{\"name\":\"gpu\",\"addresses\":[" + addresses + "]}'\n");
        Files.setPosixFilePermissions(script, PosixFilePermissions.fromString("rwx------"));
        return script;
    }

    private Process start(String name, String mainClass, String... args) throws IOException {
        return start(name, LOCAL, Map.of(), mainClass, args);
    }

    /** A daemon on {@code host}, with {@code env} added to its environment. */
    private Process start(String name, ClusterHost host, Map<String, String> env, String mainClass, String... args)
            throws IOException {
        List<String> all = new ArrayList<>(List.of("-Xmx256m", mainClass));
        all.addAll(Arrays.asList(args));
        Process p = launch(name, host, env, all.toArray(new String[0]));
        daemons.add(p);
        // Should this JVM end before the finally block runs (killed by a timeout), take the tree along.
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            p.descendants().forEach(ProcessHandle::destroyForcibly);
            p.destroyForcibly();
        }));
        return p;
    }

    /**
     * java -cp SPARK_HOME/jars/* with Spark's module options, as bin/spark-class runs a class; output
     * (stdout and stderr) to logs/NAME.log.
     */
    private Process launch(String name, String... args) throws IOException {
        return launch(name, LOCAL, Map.of(), args);
    }

    /** As {@link #launch(String, String...)}, on {@code host} (through its wrapper, on its address), with {@code env}. */
    private Process launch(String name, ClusterHost host, Map<String, String> env, String... args) throws IOException {
        List<String> command = new ArrayList<>(host.wrapper());
        command.add(Paths.get(System.getProperty("java.home"), "bin", "java").toString());
        command.add("-cp");
        command.add(home.resolve("jars") + File.separator + "*");
        command.addAll(Arrays.asList(JavaModuleOptions.defaultModuleOptionArray()));
        command.addAll(Arrays.asList(args));
        ProcessBuilder pb = new ProcessBuilder(command).directory(home.toFile()).redirectErrorStream(true)
                .redirectOutput(home.resolve("logs/" + name + ".log").toFile());
        pb.environment().keySet().removeIf(k -> k.startsWith("SPARK_") || k.equals("JAVA_TOOL_OPTIONS"));
        pb.environment().put("SPARK_HOME", home.toString());
        pb.environment().put("SPARK_SCALA_VERSION", "2.13");
        pb.environment().put("SPARK_LOCAL_IP", host.address());
        pb.environment().put("SPARK_CONF_DIR", home.resolve("conf").toString());
        pb.environment().putAll(env);
        return pb.start();
    }

    private Matcher awaitLog(String name, Process p, Pattern pattern, long seconds) throws IOException, InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        Path log = home.resolve("logs/" + name + ".log");
        while (System.nanoTime() < deadline) {
            Matcher m = pattern.matcher(Files.exists(log) ? Files.readString(log) : "");
            if (m.find()) {
                return m;
            }
            if (!p.isAlive()) {
                fail(name + " exited with " + p.exitValue() + " before logging /" + pattern + "/" + logs());
            }
            Thread.sleep(250);
        }
        fail(name + " did not log /" + pattern + "/ within " + seconds + " s" + logs());
        return null;
    }

    /** Stops a process and its children (the worker's executors), then checks that none is left. */
    private static void stop(Process p) throws InterruptedException {
        List<ProcessHandle> tree = new ArrayList<>(p.descendants().collect(Collectors.toList()));
        tree.add(p.toHandle());
        tree.forEach(ProcessHandle::destroy);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        for (ProcessHandle h : tree) {
            long left = deadline - System.nanoTime();
            try {
                h.onExit().get(Math.max(1, left), TimeUnit.NANOSECONDS);
            } catch (ExecutionException | TimeoutException e) {
                h.destroyForcibly();
            }
        }
        for (ProcessHandle h : tree) {
            try {
                h.onExit().get(10, TimeUnit.SECONDS);
            } catch (ExecutionException | TimeoutException e) {
                // reported below
            }
            assertTrue(!h.isAlive(), "process " + h.pid() + " is still alive after being stopped");
        }
    }

    private String executorLogs() throws IOException {
        return executorLogs(home.resolve("work"));
    }

    /** The executors' stdout and stderr files under {@code work}, each after its path. */
    private String executorLogs(Path work) throws IOException {
        StringBuilder out = new StringBuilder();
        if (!Files.isDirectory(work)) {
            return "";
        }
        try (Stream<Path> files = Files.walk(work)) {
            for (Path f : files.filter(f -> f.getFileName().toString().equals("stderr")
                    || f.getFileName().toString().equals("stdout")).sorted().collect(Collectors.toList())) {
                out.append("==> ").append(home.relativize(f)).append('\n').append(Files.readString(f));
            }
        }
        return out.toString();
    }

    /** The tails of every log, for a failure's message. */
    private String logs() {
        return logs("driver");
    }

    private String logs(String driver) {
        StringBuilder out = new StringBuilder("\n");
        try {
            for (String name : List.of("master", "worker", "worker-host-a", "worker-host-b", driver)) {
                Path log = home.resolve("logs/" + name + ".log");
                out.append("\n==> ").append(name).append(".log <==\n").append(tail(Files.exists(log) ? Files.readString(log) : "", 40));
            }
            out.append("\n==> executor <==\n").append(tail(executorLogs(), 60));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return out.toString();
    }

    private static String tail(String text, int lines) {
        String[] all = text.split("\n");
        return String.join("\n", Arrays.asList(all).subList(Math.max(0, all.length - lines), all.length));
    }
}
