package org.sparkccl.core.topo;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Builds a sysfs tree of a made-up machine in a directory: {@code devices/pci<dom>:<bus>/<bdf>/...} with
 * the attribute files the reader uses, {@code bus/pci/devices/<bdf>} links into it, and
 * {@code devices/system/node/node<N>/cpulist}, the way Linux lays them out.
 */
final class SysfsFixture {
    static final int NVIDIA = 0x10de;
    static final String GEN3 = "8.0 GT/s PCIe";
    static final String GEN4 = "16.0 GT/s PCIe";
    static final String GEN5 = "32.0 GT/s PCIe";

    final Path root;
    private final Map<String, Path> dirs = new HashMap<>();

    SysfsFixture(Path root) {
        this.root = root;
    }

    SysfsFixture numaNode(int id, String cpus) {
        Path node = root.resolve("devices/system/node/node" + id);
        write(node.resolve("cpulist"), cpus);
        return this;
    }

    SysfsFixture hostBridge(String name) {
        Path dir = root.resolve("devices").resolve(name);
        mkdirs(dir);
        dirs.put(name, dir);
        return this;
    }

    /** A PCI function under {@code parent} (a host bridge or a bridge added before). */
    SysfsFixture device(String parent, String busId, int classCode, int vendor, int numa, String speed, int width,
                        String maxSpeed, int maxWidth) {
        Path parentDir = dirs.get(parent);
        if (parentDir == null) {
            throw new IllegalArgumentException("no " + parent + " in the fixture yet");
        }
        Path dir = parentDir.resolve(busId);
        dirs.put(busId, dir);
        write(dir.resolve("class"), String.format("0x%06x", classCode));
        write(dir.resolve("vendor"), String.format("0x%04x", vendor));
        write(dir.resolve("device"), "0x1db4");
        write(dir.resolve("numa_node"), Integer.toString(numa));
        write(dir.resolve("current_link_speed"), speed);
        write(dir.resolve("current_link_width"), Integer.toString(width));
        write(dir.resolve("max_link_speed"), maxSpeed);
        write(dir.resolve("max_link_width"), Integer.toString(maxWidth));
        Path link = root.resolve("bus/pci/devices").resolve(busId);
        mkdirs(link.getParent());
        try {
            Files.createSymbolicLink(link, link.getParent().relativize(dir));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return this;
    }

    SysfsFixture bridge(String parent, String busId, int numa) {
        return device(parent, busId, 0x060400, 0x10b5, numa, GEN3, 16, GEN3, 16);
    }

    SysfsFixture gpu(String parent, String busId, int numa) {
        return device(parent, busId, 0x030200, NVIDIA, numa, GEN3, 16, GEN3, 16);
    }

    SysfsFixture nic(String parent, String busId, int numa) {
        return device(parent, busId, 0x020700, 0x15b3, numa, GEN3, 16, GEN3, 16);
    }

    /** A function the reader must leave out (a SATA controller). */
    SysfsFixture other(String parent, String busId, int numa) {
        return device(parent, busId, 0x010601, 0x8086, numa, GEN3, 1, GEN3, 1);
    }

    SysfsFixture aer(String busId, long rxErr, long badTlp) {
        Path dir = dirs.get(busId);
        write(dir.resolve("aer_dev_correctable"), "RxErr " + rxErr + "\nBadTLP " + badTlp + "\nBadDLLP 0\nTOTAL_ERR_COR "
                + (rxErr + badTlp) + "\n");
        write(dir.resolve("aer_dev_nonfatal"), "Undefined 0\nCmpltTO 0\nTOTAL_ERR_NONFATAL 0\n");
        write(dir.resolve("aer_dev_fatal"), "Undefined 0\nDLP 0\nTOTAL_ERR_FATAL 0\n");
        return this;
    }

    /** A PCIe switch (upstream port at {@code bus}:00.0, downstream ports at bus+1) with a GPU under each of two ports. */
    List<String> switchWithTwoGpus(String parent, int domainBus, int numa) {
        String up = bdf(domainBus, 0);
        bridge(parent, up, numa);
        List<String> gpus = new ArrayList<>();
        for (int port = 0; port < 2; port++) {
            String down = bdf(domainBus + 1, 0x08 + 8 * port);
            bridge(up, down, numa);
            String gpu = bdf(domainBus + 2 + port, 0);
            gpu(down, gpu, numa);
            gpus.add(gpu);
        }
        return gpus;
    }

    /**
     * The dual-socket 8-GPU PCIe box: per socket two PCIe switches with two GPUs each. Cascaded: both
     * switches hang below one more switch on the socket's root port (GPUs of a socket are PXB apart),
     * and a NIC sits on a second host bridge of socket 0. Not cascaded: each switch has its own host
     * bridge (GPUs of a socket are NODE apart). Returns the GPUs, switch pairs next to each other.
     */
    static List<String> dualSocketEightGpus(SysfsFixture f, boolean cascaded) {
        f.numaNode(0, "0-19,40-59").numaNode(1, "20-39,60-79");
        List<String> gpus = new ArrayList<>();
        for (int socket = 0; socket < 2; socket++) {
            int base = socket * 0x80;
            if (cascaded) {
                String hb = hostBridgeName(base);
                f.hostBridge(hb);
                String rootPort = bdf(base, 0x08);
                f.bridge(hb, rootPort, socket);
                String top = bdf(base + 1, 0);
                f.bridge(rootPort, top, socket);
                for (int k = 0; k < 2; k++) {
                    String down = bdf(base + 2, 0x08 + 8 * k);
                    f.bridge(top, down, socket);
                    gpus.addAll(f.switchWithTwoGpus(down, base + 0x10 + 0x10 * k, socket));
                }
                if (socket == 0) {
                    f.hostBridge("pci0000:40").bridge("pci0000:40", bdf(0x40, 0x08), 0).nic(bdf(0x40, 0x08), bdf(0x41, 0), 0);
                    f.other(rootPort, bdf(base + 0x30, 0), 0);
                }
            } else {
                for (int k = 0; k < 2; k++) {
                    int bus = base + 0x40 * k;
                    String hb = hostBridgeName(bus);
                    f.hostBridge(hb);
                    String rootPort = bdf(bus, 0x08);
                    f.bridge(hb, rootPort, socket);
                    gpus.addAll(f.switchWithTwoGpus(rootPort, bus + 0x10, socket));
                }
            }
        }
        return gpus;
    }

    /** Rewrites a device's link files: how it runs now and what it can do. */
    SysfsFixture link(String busId, String speed, int width, String maxSpeed, int maxWidth) {
        Path dir = dirs.get(busId);
        write(dir.resolve("current_link_speed"), speed);
        write(dir.resolve("current_link_width"), Integer.toString(width));
        write(dir.resolve("max_link_speed"), maxSpeed);
        write(dir.resolve("max_link_width"), Integer.toString(maxWidth));
        return this;
    }

    /**
     * A 4-GPU box: one NUMA node, one root port, one PCIe switch, a GPU on each of four downstream
     * ports, every link at {@code gen} x16. Returns the GPUs in bus order.
     */
    static List<String> fourGpusBehindOneSwitch(SysfsFixture f, String gen) {
        f.numaNode(0, "0-31").hostBridge("pci0000:00");
        f.device("pci0000:00", "0000:00:01.0", 0x060400, 0x8086, 0, gen, 16, gen, 16);
        f.device("0000:00:01.0", "0000:01:00.0", 0x060400, 0x10b5, 0, gen, 16, gen, 16);
        List<String> gpus = new ArrayList<>();
        for (int port = 0; port < 4; port++) {
            String down = bdf(0x02, 0x08 * (port + 1));
            f.device("0000:01:00.0", down, 0x060400, 0x10b5, 0, gen, 16, gen, 16);
            String gpu = bdf(0x10 + port, 0);
            f.device(down, gpu, 0x030200, NVIDIA, 0, gen, 16, gen, 16);
            gpus.add(gpu);
        }
        return gpus;
    }

    /**
     * The 2-GPU H200 machine: one NUMA node, each H200 (Gen5 x16) on a root port of its own host
     * bridge, so over PCIe they are NODE apart; NVLink (18 links) is added by the caller.
     */
    static List<String> h200Pair(SysfsFixture f) {
        f.numaNode(0, "0-15").hostBridge("pci0000:00").hostBridge("pci0000:80");
        f.device("pci0000:00", "0000:00:01.0", 0x060400, 0x8086, 0, GEN5, 16, GEN5, 16)
                .device("0000:00:01.0", "0000:19:00.0", 0x030200, NVIDIA, 0, GEN5, 16, GEN5, 16);
        f.device("pci0000:80", "0000:80:01.0", 0x060400, 0x8086, 0, GEN5, 16, GEN5, 16)
                .device("0000:80:01.0", "0000:8a:00.0", 0x030200, NVIDIA, 0, GEN5, 16, GEN5, 16);
        return List.of("0000:19:00.0", "0000:8a:00.0");
    }

    static String hostBridgeName(int bus) {
        return String.format("pci0000:%02x", bus);
    }

    static String bdf(int bus, int deviceNumber) {
        return String.format("0000:%02x:%02x.0", bus, deviceNumber);
    }

    private static void write(Path file, String text) {
        mkdirs(file.getParent());
        try {
            Files.writeString(file, text + "\n");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static void mkdirs(Path dir) {
        try {
            Files.createDirectories(dir);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
