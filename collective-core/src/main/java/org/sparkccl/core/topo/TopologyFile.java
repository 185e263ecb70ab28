package org.sparkccl.core.topo;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Supplier;

/**
 * The topology file: a machine's topology saved as text, to replay it elsewhere
 * ({@code SPARKCCL_TOPO_FILE}, {@code sparkccl-topo --topo-file}), or to add what sysfs cannot show.
 * One item a line; {@code #} starts a comment; fields after the first words are {@code key=value}:
 *
 * <pre>
 * sparkccl-topology 1
 * smp 10                                   GB/s between NUMA nodes
 * numa 0 cpus=0-31,64-95
 * hostbridge pci0000:17 numa=0
 * pci 0000:17:00.0 parent=pci0000:17 class=0x060400 vendor=0x8086 device=0x2030 numa=0 link=8x16 maxlink=8x16
 * pci 0000:19:00.0 parent=0000:18:08.0 class=0x030200 vendor=0x10de device=0x2335 numa=0 link=16x16 maxlink=32x16 aer.correctable.TOTAL_ERR_COR=0
 * nvlink 0000:19:00.0 0000:3b:00.0 18      18 links at 25 GB/s each
 * nvlink 0000:19:00.0 0000:5d:00.0 12 50   12 links at 50 GB/s each
 * </pre>
 *
 * A file with {@code pci} or {@code hostbridge} lines is a whole topology and replaces sysfs; a file
 * of {@code nvlink} (and {@code smp}) lines only is laid over what sysfs shows.
 */
public final class TopologyFile {
    public static final String HEADER = "sparkccl-topology 1";

    private TopologyFile() {
    }

    /** Reads a whole topology. */
    public static Topology read(Path file) {
        return overlay(file, Topology::empty);
    }

    /**
     * The file's topology where it is a whole one, else the base topology (asked for only then) with the
     * file's NVLink, numa and smp lines.
     */
    public static Topology overlay(Path file, Supplier<Topology> base) {
        List<String> lines;
        try {
            lines = Files.readAllLines(file, StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read the topology file " + file + ": " + e.getMessage(), e);
        }
        try {
            return parse(lines, base);
        } catch (RuntimeException e) {
            throw new IllegalArgumentException("topology file " + file + ": " + e.getMessage(), e);
        }
    }

    static Topology parse(List<String> lines, Supplier<Topology> baseSupplier) {
        List<PciDevice> devices = new ArrayList<>();
        List<HostBridge> bridges = new ArrayList<>();
        List<NumaNode> numa = new ArrayList<>();
        List<NvLink> nvLinks = new ArrayList<>();
        double smp = Double.NaN;
        boolean whole = false;
        int number = 0;
        for (String raw : lines) {
            number++;
            int hash = raw.indexOf('#');
            String line = (hash >= 0 ? raw.substring(0, hash) : raw).trim();
            if (line.isEmpty()) {
                continue;
            }
            String[] w = line.split("\\s+");
            try {
                switch (w[0]) {
                    case "sparkccl-topology":
                        if (!w[1].equals("1")) {
                            throw new IllegalArgumentException("version " + w[1] + " is not known (this reads version 1)");
                        }
                        break;
                    case "smp":
                        smp = Double.parseDouble(w[1]);
                        break;
                    case "numa":
                        numa.add(new NumaNode(Integer.parseInt(w[1]), fields(w, 2).getOrDefault("cpus", "")));
                        break;
                    case "hostbridge":
                        whole = true;
                        bridges.add(new HostBridge(w[1], Integer.parseInt(fields(w, 2).getOrDefault("numa", "-1"))));
                        break;
                    case "pci":
                        whole = true;
                        devices.add(device(w));
                        break;
                    case "nvlink":
                        nvLinks.add(new NvLink(w[1], w[2], Integer.parseInt(w[3]),
                                w.length > 4 ? Double.parseDouble(w[4]) : NvLink.DEFAULT_GBPS_PER_LINK));
                        break;
                    default:
                        throw new IllegalArgumentException("unknown item '" + w[0]
                                + "' (known: sparkccl-topology, smp, numa, hostbridge, pci, nvlink)");
                }
            } catch (ArrayIndexOutOfBoundsException e) {
                throw new IllegalArgumentException("line " + number + " is missing fields: '" + raw + "'", e);
            } catch (RuntimeException e) {
                throw new IllegalArgumentException("line " + number + " ('" + raw + "'): " + e.getMessage(), e);
            }
        }
        if (whole) {
            return new Topology(devices, bridges, numa, nvLinks, Double.isNaN(smp) ? Topology.DEFAULT_SMP_GBPS : smp);
        }
        Topology base = baseSupplier.get();
        if (Double.isNaN(smp)) {
            smp = base.smpGBps();
        }
        Topology out = new Topology(base.devices(), base.hostBridges(), numa.isEmpty() ? base.numaNodes() : numa,
                base.nvLinks(), smp);
        for (NvLink l : nvLinks) {
            out = out.withNvLink(l);
        }
        return out;
    }

    private static PciDevice device(String[] w) {
        Map<String, String> f = fields(w, 2);
        String parent = f.get("parent");
        if (parent == null) {
            throw new IllegalArgumentException("pci " + w[1] + " has no parent=");
        }
        int classCode = Integer.decode(f.getOrDefault("class", "0"));
        int vendor = Integer.decode(f.getOrDefault("vendor", "0"));
        Map<String, Long> aer = new LinkedHashMap<>();
        for (Map.Entry<String, String> e : f.entrySet()) {
            if (e.getKey().startsWith("aer.")) {
                aer.put(e.getKey().substring(4), Long.parseLong(e.getValue()));
            }
        }
        return new PciDevice(w[1], parent, DeviceKind.of(classCode, vendor), classCode, vendor,
                Integer.decode(f.getOrDefault("device", "0")), Integer.parseInt(f.getOrDefault("numa", "-1")),
                f.containsKey("link") ? PciLink.fromFileText(f.get("link")) : null,
                f.containsKey("maxlink") ? PciLink.fromFileText(f.get("maxlink")) : null, aer);
    }

    private static Map<String, String> fields(String[] w, int from) {
        Map<String, String> out = new LinkedHashMap<>();
        for (int i = from; i < w.length; i++) {
            int eq = w[i].indexOf('=');
            if (eq <= 0) {
                throw new IllegalArgumentException("expected key=value, got '" + w[i] + "'");
            }
            out.put(w[i].substring(0, eq), w[i].substring(eq + 1));
        }
        return out;
    }

    /** The topology as the text {@link #read} reads back to an equal model. */
    public static String format(Topology t) {
        StringBuilder b = new StringBuilder();
        b.append(HEADER).append('\n');
        b.append("smp ").append(PciLink.formatSpeed(t.smpGBps())).append('\n');
        for (NumaNode n : t.numaNodes()) {
            b.append("numa ").append(n.id()).append(n.cpuList().isEmpty() ? "" : " cpus=" + n.cpuList()).append('\n');
        }
        for (HostBridge h : t.hostBridges()) {
            b.append("hostbridge ").append(h.name()).append(" numa=").append(h.numaNode()).append('\n');
        }
        for (PciDevice d : t.devices()) {
            b.append("pci ").append(d.busId()).append(" parent=").append(d.parent())
                    .append(String.format(Locale.ROOT, " class=0x%06x vendor=0x%04x device=0x%04x", d.classCode(), d.vendor(),
                            d.deviceId()))
                    .append(" numa=").append(d.numaNode());
            if (d.link() != null) {
                b.append(" link=").append(d.link().toFileText());
            }
            if (d.maxLink() != null) {
                b.append(" maxlink=").append(d.maxLink().toFileText());
            }
            for (Map.Entry<String, Long> e : d.aer().entrySet()) {
                b.append(" aer.").append(e.getKey()).append('=').append(e.getValue());
            }
            b.append('\n');
        }
        for (NvLink l : t.nvLinks()) {
            b.append("nvlink ").append(l.busIdA()).append(' ').append(l.busIdB()).append(' ').append(l.links());
            if (l.gbpsPerLink() != NvLink.DEFAULT_GBPS_PER_LINK) {
                b.append(' ').append(PciLink.formatSpeed(l.gbpsPerLink()));
            }
            b.append('\n');
        }
        return b.toString();
    }

    public static void save(Topology t, Path file) {
        try {
            Files.writeString(file, format(t), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write the topology file " + file + ": " + e.getMessage(), e);
        }
    }
}
