package org.sparkccl.spark;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

/**
 * Two hosts on one machine for {@link StandaloneClusterIT}: two network namespaces joined by a veth
 * pair, 10.213.77.1 and 10.213.77.2 on a /30, loopback up in each (the addresses exist inside the
 * namespaces only, so they cannot clash with the machine's own networks or another run's). Each
 * host's processes start through {@code ip netns exec NS unshare --uts sh -c 'hostname NAME && exec
 * ...'}: a UTS namespace of their own gives them the host's name, so sparkccl's host id (host name
 * and boot id) tells the two apart with no SPARKCCL_HOST_ID. /dev/shm stays shared by both, as the
 * boot id does: the host id alone keeps shared memory inside each host.
 *
 * <p>Each namespace also has a decoy interface that Java lists before the veth, with an address the
 * other host has no route to: a rank that listened on "the first interface that is up" instead of
 * its executor's Spark host would be unreachable, and the test would fail.
 *
 * <p>Needs root, iproute2's {@code ip} and util-linux's {@code unshare}: {@link #unavailableReason()}
 * says why not. Namespaces are named {@code sparkccl-it-PID-a|b}; those of runs whose JVM is gone
 * (killed before it could delete them) are deleted, with what still runs in them, before new ones
 * are made.
 */
final class NetworkNamespaceHosts implements AutoCloseable {
    private static final String PREFIX = "sparkccl-it-";
    private static final String[] ADDRESSES = {"10.213.77.1", "10.213.77.2"};
    private static final String[] DECOYS = {"10.213.78.1", "10.213.78.2"};
    private static final Optional<String> UNAVAILABLE = probe();

    private final String ip;
    private final List<String> namespaces = new ArrayList<>();
    private final List<ClusterHost> hosts = new ArrayList<>();
    private final Thread deleteAtExit = new Thread(this::deleteQuietly);

    private NetworkNamespaceHosts(String ip) {
        this.ip = ip;
    }

    /** Why this machine cannot make the namespaces (not root, no ip or unshare, ip refused), or empty. */
    static Optional<String> unavailableReason() {
        return UNAVAILABLE;
    }

    /** host-a and host-b, each in a namespace of its own. */
    static NetworkNamespaceHosts create() throws IOException, InterruptedException {
        NetworkNamespaceHosts made = new NetworkNamespaceHosts(find("ip").orElseThrow());
        made.deleteLeftovers();
        Runtime.getRuntime().addShutdownHook(made.deleteAtExit);
        try {
            made.build();
        } catch (IOException | InterruptedException | RuntimeException e) {
            made.close();
            throw e;
        }
        return made;
    }

    List<ClusterHost> hosts() {
        return hosts;
    }

    private void build() throws IOException, InterruptedException {
        String boot = Files.readString(Paths.get("/proc/sys/kernel/random/boot_id")).trim();
        long pid = ProcessHandle.current().pid();
        String[] names = {"host-a", "host-b"};
        for (String name : names) {
            String ns = PREFIX + pid + "-" + name.substring(name.length() - 1);
            run(ip, "netns", "add", ns);
            namespaces.add(ns);
        }
        // Created in one namespace and its peer moved into the other at once: nothing is left in ours.
        run(ip, "link", "add", "veth0", "netns", namespaces.get(0), "type", "veth", "peer", "name", "veth0",
                "netns", namespaces.get(1));
        for (int h = 0; h < 2; h++) {
            String ns = namespaces.get(h);
            run(ip, "-n", ns, "addr", "add", ADDRESSES[h] + "/30", "dev", "veth0");
            // Made after the veth: Java lists a namespace's interfaces newest first.
            run(ip, "-n", ns, "link", "add", "decoy0", "type", "veth", "peer", "name", "decoy1");
            run(ip, "-n", ns, "addr", "add", DECOYS[h] + "/32", "dev", "decoy0");
            for (String link : List.of("lo", "veth0", "decoy0", "decoy1")) {
                run(ip, "-n", ns, "link", "set", link, "up");
            }
            List<String> wrapper = List.of(ip, "netns", "exec", ns, find("unshare").orElseThrow(), "--uts",
                    "sh", "-c", "hostname \"$0\" && exec \"$@\"", names[h]);
            hosts.add(new ClusterHost(names[h], ADDRESSES[h], wrapper, Map.of(), names[h] + "/" + boot));
        }
    }

    /** Deletes the namespaces; processes still running in one keep it (and the veth) until they end. */
    @Override
    public void close() throws IOException, InterruptedException {
        try {
            for (String ns : namespaces) {
                run(ip, "netns", "delete", ns);
            }
            namespaces.clear();
        } finally {
            try {
                Runtime.getRuntime().removeShutdownHook(deleteAtExit);
            } catch (IllegalStateException shuttingDown) {
                // the hook runs anyway
            }
        }
    }

    private void deleteQuietly() {
        for (String ns : namespaces) {
            try {
                run(ip, "netns", "delete", ns);
            } catch (IOException | InterruptedException e) {
                System.err.println("NetworkNamespaceHosts: " + e.getMessage());
            }
        }
    }

    /** Namespaces of earlier runs whose JVM is gone, and the processes left in them. */
    private void deleteLeftovers() throws IOException, InterruptedException {
        for (String line : run(ip, "netns", "list").split("\n")) {
            String ns = line.split(" ")[0];
            if (!ns.startsWith(PREFIX)) {
                continue;
            }
            String owner = ns.substring(PREFIX.length()).split("-")[0];
            if (owner.matches("\\d+") && ProcessHandle.of(Long.parseLong(owner)).isPresent()) {
                continue; // a run in progress
            }
            for (String pid : run(ip, "netns", "pids", ns).split("\\s+")) {
                if (!pid.isEmpty()) {
                    ProcessHandle.of(Long.parseLong(pid)).ifPresent(ProcessHandle::destroyForcibly);
                }
            }
            run(ip, "netns", "delete", ns);
        }
    }

    private static Optional<String> probe() {
        try {
            Object uid = Files.getAttribute(Paths.get("/proc/self"), "unix:uid");
            if (((Number) uid).intValue() != 0) {
                return Optional.of("not root (uid " + uid + ")");
            }
            for (String tool : List.of("ip", "unshare")) {
                if (find(tool).isEmpty()) {
                    return Optional.of("no " + tool + " on PATH or in /usr/sbin, /sbin");
                }
            }
            String ns = PREFIX + ProcessHandle.current().pid() + "-probe";
            String ip = find("ip").orElseThrow();
            run(ip, "netns", "add", ns);
            run(ip, "netns", "delete", ns);
            return Optional.empty();
        } catch (IOException | RuntimeException e) {
            return Optional.of(e.toString());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return Optional.of(e.toString());
        }
    }

    private static Optional<String> find(String tool) {
        List<String> dirs = new ArrayList<>(Arrays.asList(System.getenv().getOrDefault("PATH", "").split(File.pathSeparator)));
        dirs.addAll(List.of("/usr/sbin", "/sbin", "/usr/bin", "/bin"));
        return dirs.stream().filter(d -> !d.isEmpty()).map(d -> Paths.get(d, tool)).filter(Files::isExecutable)
                .map(Path::toString).findFirst();
    }

    /** Runs a command to its end; its output, or an IOException with the output when it failed. */
    private static String run(String... command) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(30, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            throw new IOException(String.join(" ", command) + " did not end within 30 s: " + out);
        }
        if (p.exitValue() != 0) {
            throw new IOException(String.join(" ", command) + " failed (exit " + p.exitValue() + "): " + out.trim());
        }
        return out;
    }
}
