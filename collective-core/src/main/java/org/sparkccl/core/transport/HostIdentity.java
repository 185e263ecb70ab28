package org.sparkccl.core.transport;

import java.io.IOException;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import org.sparkccl.core.param.Params;

/**
 * Where this process runs: a host id that differs between machines (and containers with their own
 * kernel boot), the process id, and the device number of /dev/shm (two containers on one host
 * share memory only if they share that mount).
 */
public final class HostIdentity {
    private static final Path BOOT_ID = Paths.get("/proc/sys/kernel/random/boot_id");
    private static final Path HOST_NAME = Paths.get("/proc/sys/kernel/hostname");
    private static final Path DEV_SHM = Paths.get("/dev/shm");

    private HostIdentity() {
    }

    /**
     * Host name plus kernel boot id (equal for processes of one machine, different across machines),
     * unless {@code SPARKCCL_HOST_ID} (or {@code -Dsparkccl.hostId}) names another: see {@link #hostId(Params)}.
     */
    public static String hostId() {
        return hostId(Params.fromEnvironment());
    }

    /**
     * {@link Params#HOST_ID} where set, else this machine's id. The setting lets tests (and odd setups)
     * pretend that processes of one machine run on different hosts: they then talk through sockets.
     */
    public static String hostId(Params params) {
        String pretend = params.get(Params.HOST_ID);
        return pretend.isEmpty() ? machineId() : "pretend:" + pretend;
    }

    /** Host name plus kernel boot id, whatever the settings say. */
    public static String machineId() {
        String boot = "";
        try {
            boot = Files.readString(BOOT_ID).trim();
        } catch (IOException | RuntimeException e) {
            // Not Linux, or /proc hidden: the host name alone has to do.
        }
        return hostName() + "/" + boot;
    }

    /**
     * The kernel's host name, as {@code hostname} prints it. Read from /proc rather than through
     * {@code InetAddress.getLocalHost()}, which also looks the name up and fails where it does not
     * resolve (containers, UTS namespaces, hosts missing from DNS): every such host was
     * "unknown-host", and two of them on one kernel (one boot id) looked like one host.
     */
    private static String hostName() {
        try {
            String name = Files.readString(HOST_NAME).trim();
            if (!name.isEmpty()) {
                return name;
            }
        } catch (IOException | RuntimeException e) {
            // Not Linux: ask the JDK.
        }
        try {
            return InetAddress.getLocalHost().getHostName();
        } catch (IOException e) {
            return "unknown-host";
        }
    }

    public static long pid() {
        return ProcessHandle.current().pid();
    }

    /** Device number of /dev/shm, or -1 where there is none. */
    public static long shmDevice() {
        try {
            Object dev = Files.getAttribute(DEV_SHM, "unix:dev");
            return ((Number) dev).longValue();
        } catch (IOException | RuntimeException e) {
            return -1;
        }
    }

    /**
     * True when a process with this pid runs on this host. A zombie (exited, not yet reaped by its
     * parent) counts as dead: {@link ProcessHandle#isAlive} says true for it, and a killed rank stays
     * one until its launcher waits for it, while its peers must already clean up after it.
     */
    public static boolean isAlive(long pid) {
        if (!ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false)) {
            return false;
        }
        try {
            String stat = Files.readString(Paths.get("/proc", Long.toString(pid), "stat"));
            int end = stat.lastIndexOf(')'); // the command name, in parentheses, may hold anything
            char state = end >= 0 && end + 2 < stat.length() ? stat.charAt(end + 2) : '?';
            return state != 'Z' && state != 'X';
        } catch (IOException | RuntimeException e) {
            return true; // no /proc (not Linux) or it just went: ProcessHandle's answer stands
        }
    }
}
