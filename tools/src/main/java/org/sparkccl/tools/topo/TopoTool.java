package org.sparkccl.tools.topo;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.FileStore;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import org.sparkccl.core.log.CclLog;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.topo.DeviceKind;
import org.sparkccl.core.topo.HostBridge;
import org.sparkccl.core.topo.LinkHealth;
import org.sparkccl.core.topo.NumaNode;
import org.sparkccl.core.topo.NvLink;
import org.sparkccl.core.topo.PciDevice;
import org.sparkccl.core.topo.Ring;
import org.sparkccl.core.topo.RingPlanner;
import org.sparkccl.core.topo.RingSearch;
import org.sparkccl.core.topo.Topology;
import org.sparkccl.core.topo.TopologyFile;
import org.sparkccl.core.topo.TopologySource;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code bin/sparkccl-topo}: what sparkccl sees of this machine (GPUs and their PCIe links, the PCIe
 * tree, NVLink, NUMA nodes, AER counters, /dev/shm), the path kind of every GPU and NIC pair as
 * {@code nvidia-smi topo -m} prints it, and the rings it would build for one rank per GPU.
 */
@Command(name = "sparkccl-topo", mixinStandardHelpOptions = true, sortOptions = false, usageHelpWidth = 100,
        description = {"Prints the machine as sparkccl sees it: GPUs, PCIe tree, NVLink, NUMA, link speed against "
                + "capability, AER counters, /dev/shm, the path matrix and the rings it would build."},
        footer = {"", "NVLink is not in sysfs: give it in a topology file, one line per GPU pair:",
                "  nvlink 0000:19:00.0 0000:3b:00.0 18",
                "--save writes the whole topology in that format; SPARKCCL_TOPO_FILE=FILE replays it for the library."})
public final class TopoTool implements Callable<Integer> {
    @Spec
    private CommandSpec spec;

    @Option(names = "--sysfs", defaultValue = "/sys", paramLabel = "DIR",
            description = "sysfs root to read; default ${DEFAULT-VALUE}")
    Path sysfs;

    @Option(names = "--topo-file", paramLabel = "FILE",
            description = "topology file: a whole saved topology (replaces sysfs) or nvlink lines laid over sysfs; "
                    + "default SPARKCCL_TOPO_FILE")
    Path topoFile;

    @Option(names = "--save", paramLabel = "FILE", description = "write the topology seen to FILE, to replay it later")
    Path save;

    @Option(names = "--channels", defaultValue = "2", paramLabel = "N",
            description = "rings to show (channels, each over what the ones before left); default ${DEFAULT-VALUE}")
    int channels;

    @Option(names = "--shm", defaultValue = "/dev/shm", paramLabel = "DIR",
            description = "shared-memory directory to report on; default ${DEFAULT-VALUE}")
    Path shm;

    public static void main(String[] args) {
        System.exit(commandLine().execute(args));
    }

    /** The command with sparkccl's error handling: one line saying what went wrong, exit code 1. */
    public static CommandLine commandLine() {
        CommandLine cmd = new CommandLine(new TopoTool());
        cmd.setExecutionExceptionHandler((e, c, parsed) -> {
            c.getErr().println("sparkccl-topo: " + e.getMessage());
            return 1;
        });
        return cmd;
    }

    @Override
    public Integer call() {
        PrintWriter out = spec.commandLine().getOut();
        Params params = Params.fromEnvironment();
        Path file = topoFile;
        if (file == null && !params.get(Params.TOPO_FILE).isBlank()) {
            file = Path.of(params.get(Params.TOPO_FILE));
        }
        Topology t = TopologySource.load(sysfs, file);
        out.println("# sparkccl-topo: sysfs " + sysfs + (file == null ? "" : ", topology file " + file));
        Names names = new Names(t);
        printGpus(out, t, names);
        printTree(out, t, names);
        printNvLinks(out, t, names);
        printNuma(out, t);
        printAer(out, t, names);
        printHealth(out, t);
        printShm(out);
        printMatrix(out, t, names);
        printRings(out, t, names, params);
        if (save != null) {
            TopologyFile.save(t, save);
            out.println();
            out.println("Saved to " + save + " (replay with SPARKCCL_TOPO_FILE=" + save + " or --topo-file)");
        }
        out.flush();
        return 0;
    }

    private void printGpus(PrintWriter out, Topology t, Names names) {
        out.println();
        out.println("GPUs: " + t.gpus().size());
        for (PciDevice g : t.gpus()) {
            out.printf(Locale.ROOT, "  %-5s %s  device 0x%04x  NUMA %s  %s%n", names.of(g), g.busId(), g.deviceId(),
                    numa(t.numaNodeOf(g.busId())), linkText(g));
        }
        if (!t.nics().isEmpty()) {
            out.println("NICs: " + t.nics().size());
            for (PciDevice n : t.nics()) {
                out.printf(Locale.ROOT, "  %-5s %s  vendor 0x%04x  NUMA %s  %s%n", names.of(n), n.busId(), n.vendor(),
                        numa(t.numaNodeOf(n.busId())), linkText(n));
            }
        }
    }

    /** The link as it runs, flagged where below what it can do. */
    static String linkText(PciDevice d) {
        if (d.link() == null && d.maxLink() == null) {
            return "link unknown";
        }
        if (d.link() == null) {
            return "link down (capable of " + d.maxLink() + ")";
        }
        if (!d.linkBelowCapability()) {
            return "link " + d.link() + (d.maxLink() == null ? "" : " (its maximum)");
        }
        String text = "LINK BELOW CAPABILITY: running at " + d.link() + " of " + d.maxLink();
        if (d.linkNarrowerThanCapability()) {
            return text + " (fewer lanes than it has: check the slot, riser or BIOS bifurcation)";
        }
        return d.linkIdleDownclocked()
                ? text + " (idle: GPUs drop to 2.5 GT/s to save power; check again under load)"
                : text + " (trained below its speed: reseat the card, check the riser and the BIOS PCIe speed setting)";
    }

    private void printTree(PrintWriter out, Topology t, Names names) {
        out.println();
        out.println("PCIe tree:");
        if (t.hostBridges().isEmpty()) {
            out.println("  (no GPU or NIC on PCI)");
        }
        for (HostBridge hb : t.hostBridges()) {
            out.println("  " + hb.name() + " host bridge, NUMA " + numa(hb.numaNode()));
            printBelow(out, t, names, hb.name(), 2);
        }
    }

    private void printBelow(PrintWriter out, Topology t, Names names, String parent, int depth) {
        for (PciDevice d : t.children(parent)) {
            String what = d.kind() == DeviceKind.BRIDGE ? "bridge" : names.of(d);
            out.println(("  ".repeat(depth) + d.busId() + " " + what + "  " + (d.link() == null ? "" : d.link()))
                    .stripTrailing());
            printBelow(out, t, names, d.busId(), depth + 1);
        }
    }

    private void printNvLinks(PrintWriter out, Topology t, Names names) {
        out.println();
        out.println("NVLink:");
        if (t.nvLinks().isEmpty()) {
            out.println("  none known (sysfs cannot show NVLink; give it with --topo-file, lines 'nvlink BUSID BUSID COUNT')");
        }
        for (NvLink l : t.nvLinks()) {
            out.printf(Locale.ROOT, "  %s - %s  %d links x %s GB/s = %s GB/s per direction%n", names.of(t.device(l.busIdA())),
                    names.of(t.device(l.busIdB())), l.links(), gbps(l.gbpsPerLink()), gbps(l.bandwidthGBps()));
        }
    }

    private void printNuma(PrintWriter out, Topology t) {
        out.println();
        out.println("NUMA nodes: " + t.numaNodes().size());
        for (NumaNode n : t.numaNodes()) {
            out.printf(Locale.ROOT, "  node%d  CPUs %s (%d)%n", n.id(), n.cpuList(), n.cpuCount());
        }
    }

    private void printAer(PrintWriter out, Topology t, Names names) {
        out.println();
        out.println("AER counters:");
        boolean any = false;
        for (PciDevice d : t.devices()) {
            if (d.aer().isEmpty()) {
                continue;
            }
            any = true;
            Map<String, Long> totals = new LinkedHashMap<>();
            List<String> nonZero = new ArrayList<>();
            for (Map.Entry<String, Long> e : d.aer().entrySet()) {
                if (e.getKey().contains(".TOTAL_")) {
                    totals.put(e.getKey().substring(0, e.getKey().indexOf('.')), e.getValue());
                } else if (e.getValue() != 0) {
                    nonZero.add(e.getKey() + "=" + e.getValue());
                }
            }
            out.printf(Locale.ROOT, "  %s %-6s %s%s%n", d.busId(), d.kind() == DeviceKind.BRIDGE ? "bridge" : names.of(d),
                    totals.isEmpty() ? "(no totals)" : totals.toString().replaceAll("[{}]", ""),
                    nonZero.isEmpty() ? "" : "  " + String.join(" ", nonZero));
        }
        if (!any) {
            out.println("  no AER files (the kernel shows none for these devices)");
        }
    }

    /** The warnings a communicator logs at init, so the tool and the library say the same. */
    private void printHealth(PrintWriter out, Topology t) {
        out.println();
        out.println("Link health:");
        List<String> warnings = LinkHealth.warnings(t);
        if (warnings.isEmpty()) {
            out.println("  no GPU link below its capability (idle 2.5 GT/s excepted), no AER errors");
        }
        for (String w : warnings) {
            out.println("  WARN " + w);
        }
    }

    private void printShm(PrintWriter out) {
        out.println();
        try {
            FileStore store = Files.getFileStore(shm);
            out.printf(Locale.ROOT, "%s: size %s, free %s%n", shm, bytes(store.getTotalSpace()), bytes(store.getUsableSpace()));
        } catch (IOException e) {
            out.println(shm + ": not available (" + e.getMessage() + "); ranks on this host cannot use shared memory");
        }
    }

    private void printMatrix(PrintWriter out, Topology t, Names names) {
        out.println();
        out.println("Path matrix (NVL# NVLink, PIX one PCIe switch, PXB several switches, PHB host bridge,");
        out.println("             NODE across host bridges in a NUMA node, SYS across NUMA nodes):");
        List<PciDevice> ends = new ArrayList<>(t.gpus());
        ends.addAll(t.nics());
        if (ends.isEmpty()) {
            out.println("  (no GPUs or NICs)");
            return;
        }
        StringBuilder head = new StringBuilder("        ");
        for (PciDevice d : ends) {
            head.append(String.format(Locale.ROOT, "%-6s", names.of(d)));
        }
        out.println(head.append("CPU Affinity    NUMA").toString().stripTrailing());
        for (PciDevice a : ends) {
            StringBuilder row = new StringBuilder(String.format(Locale.ROOT, "  %-6s", names.of(a)));
            for (PciDevice b : ends) {
                row.append(String.format(Locale.ROOT, "%-6s", t.path(a.busId(), b.busId()).label()));
            }
            int node = t.numaNodeOf(a.busId());
            String cpus = "";
            for (NumaNode n : t.numaNodes()) {
                // A platform with one NUMA node often reports -1 for its devices: they are on that node.
                cpus = n.id() == node || (node < 0 && t.numaNodes().size() == 1) ? n.cpuList() : cpus;
            }
            out.println(row.append(String.format(Locale.ROOT, "%-16s%s", cpus.isEmpty() ? "?" : cpus, numa(node))));
        }
    }

    private void printRings(PrintWriter out, Topology t, Names names, Params params) {
        out.println();
        List<PciDevice> gpus = t.gpus();
        if (gpus.isEmpty()) {
            out.println("Rings: no GPUs (host-memory ranks are ringed by NUMA node, then by core, from the CPUs each"
                    + " rank runs on)");
            return;
        }
        List<String> busIds = new ArrayList<>();
        for (PciDevice g : gpus) {
            busIds.add(g.busId());
        }
        out.println("Rings for " + gpus.size() + " rank" + (gpus.size() == 1 ? "" : "s") + ", rank r on GPU r, "
                + channels + " channel" + (channels == 1 ? "" : "s") + " (what a GPU communicator of those ranks logs"
                + " with SPARKCCL_DEBUG=INFO; channels past " + RingPlanner.SEARCHED_RINGS + " repeat these):");
        List<Ring> rings = RingPlanner.plan(t, busIds, channels, RingSearch.ChannelMode.SPREAD, params,
                new CclLog(0, params));
        for (int c = 0; c < rings.size(); c++) {
            out.println("  " + RingPlanner.ringLine(c, rings.get(c), t, busIds, params));
        }
    }

    private static String numa(int node) {
        return node < 0 ? "?" : Integer.toString(node);
    }

    private static String gbps(double v) {
        return v == Math.rint(v) ? String.format(Locale.ROOT, "%.0f", v) : String.format(Locale.ROOT, "%.2f", v);
    }

    static String bytes(long b) {
        String[] units = {"B", "KiB", "MiB", "GiB", "TiB"};
        double v = b;
        int u = 0;
        while (v >= 1024 && u < units.length - 1) {
            v /= 1024;
            u++;
        }
        return String.format(Locale.ROOT, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
    }

    /** GPU0, GPU1 ... and NIC0 ... in bus order, as nvidia-smi numbers them. */
    private static final class Names {
        private final Map<String, String> byBusId = new LinkedHashMap<>();

        Names(Topology t) {
            int i = 0;
            for (PciDevice g : t.gpus()) {
                byBusId.put(g.busId(), "GPU" + i++);
            }
            i = 0;
            for (PciDevice n : t.nics()) {
                byBusId.put(n.busId(), "NIC" + i++);
            }
        }

        String of(PciDevice d) {
            return byBusId.getOrDefault(d.busId(), d.kind().name().toLowerCase(Locale.ROOT));
        }
    }
}
