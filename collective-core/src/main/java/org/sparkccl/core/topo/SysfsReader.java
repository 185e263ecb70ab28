package org.sparkccl.core.topo;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Pattern;

/**
 * Builds a {@link Topology} from a sysfs tree: {@code /sys} on a real machine, a directory of the same
 * shape in tests. Reads {@code bus/pci/devices/<bdf>} (each a link into {@code devices/pci<domain>:<bus>/...},
 * whose path is the PCIe tree), the class, vendor, device, numa_node, link speed and width files and the
 * AER counters, and {@code devices/system/node/node<N>/cpulist}. Keeps GPUs and NICs and the bridges
 * above them. NVLink is not in sysfs; add it with a topology file or {@link Topology#withNvLink}.
 */
public final class SysfsReader {
    private static final Pattern BUS_ID = Pattern.compile("[0-9a-fA-F]{4,}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\\.[0-7]");
    private static final Pattern HOST_BRIDGE = Pattern.compile("pci[0-9a-fA-F]{4,}:[0-9a-fA-F]{2}");
    private static final String[] AER_FILES = {"correctable", "nonfatal", "fatal"};

    private SysfsReader() {
    }

    public static Topology read(Path sysfsRoot) {
        try {
            return readOrThrow(sysfsRoot);
        } catch (IOException e) {
            throw new UncheckedIOException("reading the PCI topology under " + sysfsRoot + " failed: " + e.getMessage(), e);
        }
    }

    private static Topology readOrThrow(Path root) throws IOException {
        Map<String, PciDevice> all = new TreeMap<>();
        Path pciDevices = root.resolve("bus/pci/devices");
        if (Files.isDirectory(pciDevices)) {
            try (DirectoryStream<Path> entries = Files.newDirectoryStream(pciDevices)) {
                for (Path entry : entries) {
                    readDevice(entry, all);
                }
            }
        }
        // Keep GPUs and NICs and everything above them.
        Map<String, PciDevice> kept = new TreeMap<>();
        for (PciDevice d : all.values()) {
            if (d.kind() == DeviceKind.GPU || d.kind() == DeviceKind.NIC) {
                for (PciDevice up = d; up != null; up = all.get(up.parent())) {
                    kept.put(up.busId(), up);
                }
            }
        }
        // A host bridge's NUMA node is the one its devices report.
        Map<String, Integer> bridgeNuma = new TreeMap<>();
        for (PciDevice d : kept.values()) {
            PciDevice top = d;
            while (kept.containsKey(top.parent())) {
                top = kept.get(top.parent());
            }
            bridgeNuma.merge(top.parent(), d.numaNode(), Math::max);
        }
        List<HostBridge> bridges = new ArrayList<>();
        bridgeNuma.forEach((name, numa) -> bridges.add(new HostBridge(name, numa)));
        return new Topology(kept.values(), bridges, readNumaNodes(root), List.of(), Topology.DEFAULT_SMP_GBPS);
    }

    private static void readDevice(Path entry, Map<String, PciDevice> all)
            throws IOException {
        String busId = entry.getFileName().toString();
        if (!BUS_ID.matcher(busId).matches()) {
            return;
        }
        Path real = entry.toRealPath();
        // The real path is the tree: .../pci0000:17/0000:17:00.0/0000:18:00.0/<busId>.
        String parent = null;
        for (Path part : real) {
            String name = part.toString();
            if (name.equals(busId)) {
                break;
            }
            if (HOST_BRIDGE.matcher(name).matches() || BUS_ID.matcher(name).matches()) {
                parent = name;
            }
        }
        if (parent == null) {
            // Not under a host bridge directory (some hypervisors): one made-up bridge per domain and bus.
            parent = "pci" + busId.substring(0, busId.lastIndexOf(':'));
        }
        int classCode = hex(read(real, "class"), 0);
        int vendor = hex(read(real, "vendor"), 0);
        Map<String, Long> aer = new LinkedHashMap<>();
        for (String kind : AER_FILES) {
            String text = read(real, "aer_dev_" + kind);
            if (text != null) {
                for (String line : text.split("\n")) {
                    String[] f = line.trim().split("\\s+");
                    if (f.length == 2) {
                        try {
                            aer.put(kind + "." + f[0], Long.parseLong(f[1]));
                        } catch (NumberFormatException ignored) {
                            // A counter this kernel formats differently: leave it out.
                        }
                    }
                }
            }
        }
        all.put(busId, new PciDevice(busId, parent, DeviceKind.of(classCode, vendor), classCode, vendor,
                hex(read(real, "device"), 0), integer(read(real, "numa_node"), -1),
                PciLink.parse(read(real, "current_link_speed"), read(real, "current_link_width")),
                PciLink.parse(read(real, "max_link_speed"), read(real, "max_link_width")), aer));
    }

    static List<NumaNode> readNumaNodes(Path root) throws IOException {
        List<NumaNode> out = new ArrayList<>();
        Path nodes = root.resolve("devices/system/node");
        if (!Files.isDirectory(nodes)) {
            return out;
        }
        try (DirectoryStream<Path> entries = Files.newDirectoryStream(nodes, "node[0-9]*")) {
            for (Path node : entries) {
                String cpus = read(node, "cpulist");
                out.add(new NumaNode(Integer.parseInt(node.getFileName().toString().substring(4)),
                        cpus == null ? "" : cpus));
            }
        }
        return out;
    }

    /** A sysfs attribute's text, trimmed; null where it does not exist or cannot be read. */
    private static String read(Path dir, String name) {
        Path f = dir.resolve(name);
        try {
            return Files.isRegularFile(f) ? new String(Files.readAllBytes(f), StandardCharsets.US_ASCII).trim() : null;
        } catch (IOException e) {
            return null; // some attributes are root-only (config) or vanish with hot-unplug
        }
    }

    private static int hex(String text, int otherwise) {
        if (text == null) {
            return otherwise;
        }
        String t = text.startsWith("0x") || text.startsWith("0X") ? text.substring(2) : text;
        try {
            return Integer.parseInt(t, 16);
        } catch (NumberFormatException e) {
            return otherwise;
        }
    }

    private static int integer(String text, int otherwise) {
        try {
            return text == null ? otherwise : Integer.parseInt(text);
        } catch (NumberFormatException e) {
            return otherwise;
        }
    }
}
