package org.sparkccl.core.topo;

import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * What a machine looks like to the ring search: the PCIe tree (host bridges, bridges, GPUs, NICs),
 * NUMA nodes and NVLink. Immutable; {@link #withNvLink} returns a copy, for the GPU layer to add what
 * it learns at runtime. Built by {@link SysfsReader} or {@link TopologyFile}.
 *
 * <p>Path kinds follow NCCL: the PCIe part is read from the tree. A PCIe switch shows in sysfs as an
 * upstream port with its downstream ports as children, all bridges; below a root port, bridges at odd
 * depth are upstream ports, so each of those names one switch.
 */
public final class Topology {
    /**
     * GB/s across the SMP interconnect between NUMA nodes for GPU-to-GPU traffic: NCCL's figure for
     * Skylake-and-later UPI. It is what makes a ring cross sockets as few times as it can.
     */
    public static final double DEFAULT_SMP_GBPS = 10.0;

    private final Map<String, PciDevice> devices;
    private final Map<String, HostBridge> hostBridges;
    private final List<NumaNode> numaNodes;
    private final List<NvLink> nvLinks;
    private final double smpGBps;

    public Topology(Collection<PciDevice> devices, Collection<HostBridge> hostBridges, Collection<NumaNode> numaNodes,
                    Collection<NvLink> nvLinks, double smpGBps) {
        Map<String, PciDevice> d = new TreeMap<>();
        for (PciDevice dev : devices) {
            d.put(dev.busId(), dev);
        }
        Map<String, HostBridge> h = new TreeMap<>();
        for (HostBridge hb : hostBridges) {
            h.put(hb.name(), hb);
        }
        for (PciDevice dev : d.values()) {
            if (!d.containsKey(dev.parent()) && !h.containsKey(dev.parent())) {
                throw new IllegalArgumentException("device " + dev.busId() + " hangs under " + dev.parent()
                        + ", which is neither a device nor a host bridge of this topology");
            }
        }
        List<NumaNode> n = new ArrayList<>(numaNodes);
        n.sort((a, b) -> Integer.compare(a.id(), b.id()));
        for (NvLink link : nvLinks) {
            for (String end : List.of(link.busIdA(), link.busIdB())) {
                PciDevice gpu = d.get(end);
                if (gpu == null || gpu.kind() != DeviceKind.GPU) {
                    throw new IllegalArgumentException("NVLink " + link.busIdA() + " - " + link.busIdB() + ": " + end
                            + " is not a GPU of this topology (GPUs: " + busIds(d.values()) + ")");
                }
            }
        }
        this.devices = Collections.unmodifiableMap(d);
        this.hostBridges = Collections.unmodifiableMap(h);
        this.numaNodes = List.copyOf(n);
        this.nvLinks = List.copyOf(nvLinks);
        this.smpGBps = smpGBps;
    }

    /** A machine with nothing on it: no GPU, no NUMA information. */
    public static Topology empty() {
        return new Topology(List.of(), List.of(), List.of(), List.of(), DEFAULT_SMP_GBPS);
    }

    /** A copy with this NVLink added (replacing any earlier entry for the same pair). */
    public Topology withNvLink(NvLink link) {
        List<NvLink> links = new ArrayList<>();
        for (NvLink l : nvLinks) {
            if (!l.joins(link.busIdA(), link.busIdB())) {
                links.add(l);
            }
        }
        links.add(link);
        return new Topology(devices.values(), hostBridges.values(), numaNodes, links, smpGBps);
    }

    /** {@link #withNvLink(NvLink)} at the default per-link rate. */
    public Topology withNvLink(String busIdA, String busIdB, int links) {
        return withNvLink(new NvLink(busIdA, busIdB, links, NvLink.DEFAULT_GBPS_PER_LINK));
    }

    /** Every device, by bus id. */
    public Collection<PciDevice> devices() {
        return devices.values();
    }

    public PciDevice device(String busId) {
        return devices.get(busId);
    }

    public List<PciDevice> gpus() {
        return ofKind(DeviceKind.GPU);
    }

    public List<PciDevice> nics() {
        return ofKind(DeviceKind.NIC);
    }

    public Collection<HostBridge> hostBridges() {
        return hostBridges.values();
    }

    public List<NumaNode> numaNodes() {
        return numaNodes;
    }

    public List<NvLink> nvLinks() {
        return nvLinks;
    }

    public double smpGBps() {
        return smpGBps;
    }

    /** The devices directly below a bridge or host bridge, by bus id. */
    public List<PciDevice> children(String parent) {
        List<PciDevice> out = new ArrayList<>();
        for (PciDevice d : devices.values()) {
            if (d.parent().equals(parent)) {
                out.add(d);
            }
        }
        return out;
    }

    /** The device and the bridges above it, bottom up. */
    public List<PciDevice> chain(String busId) {
        List<PciDevice> out = new ArrayList<>();
        PciDevice d = require(busId);
        while (d != null) {
            out.add(d);
            d = devices.get(d.parent());
        }
        return out;
    }

    /** The host bridge at the top of a device's chain. */
    public HostBridge hostBridgeOf(String busId) {
        List<PciDevice> chain = chain(busId);
        return hostBridges.get(chain.get(chain.size() - 1).parent());
    }

    /** The NUMA node a device is attached to: its own, else its host bridge's; -1 when unknown. */
    public int numaNodeOf(String busId) {
        int own = require(busId).numaNode();
        return own >= 0 ? own : hostBridgeOf(busId).numaNode();
    }

    /** The NVLink between two GPUs, or null. */
    public NvLink nvLink(String a, String b) {
        for (NvLink l : nvLinks) {
            if (l.joins(a, b)) {
                return l;
            }
        }
        return null;
    }

    /** How {@code a} reaches {@code b}, and how fast, with degraded links costed as they run. */
    public TopoPath path(String a, String b) {
        return path(a, b, true);
    }

    /**
     * How {@code a} reaches {@code b}, and how fast. {@code costDegradedLinks}: true costs each link
     * by {@link PciDevice#planningLink()} (a link trained down counts at its current speed); false at
     * its capable speed with the lanes in use, for rings that follow the machine's shape only.
     */
    public TopoPath path(String a, String b, boolean costDegradedLinks) {
        if (a.equals(b)) {
            require(a);
            return new TopoPath(PathKind.LOC, Double.POSITIVE_INFINITY, 0);
        }
        NvLink nv = nvLink(a, b);
        if (nv != null) {
            return new TopoPath(PathKind.NVL, nv.bandwidthGBps(), nv.links());
        }
        List<PciDevice> chainA = chain(a);
        List<PciDevice> chainB = chain(b);
        Set<String> inB = new HashSet<>();
        for (PciDevice d : chainB) {
            inB.add(d.busId());
        }
        // The lowest common ancestor device, if the two meet below their host bridge.
        String meet = null;
        for (PciDevice d : chainA) {
            if (inB.contains(d.busId())) {
                meet = d.busId();
                break;
            }
        }
        double pci = Math.min(slowestBelow(chainA, meet, costDegradedLinks), slowestBelow(chainB, meet, costDegradedLinks));
        HostBridge hbA = hostBridgeOf(a);
        HostBridge hbB = hostBridgeOf(b);
        if (!hbA.name().equals(hbB.name())) {
            int nodeA = numaNodeOf(a);
            int nodeB = numaNodeOf(b);
            return nodeA == nodeB
                    ? new TopoPath(PathKind.NODE, pci, 0)
                    : new TopoPath(PathKind.SYS, Math.min(pci, smpGBps), 0);
        }
        if (meet == null) {
            return new TopoPath(PathKind.PHB, pci, 0);
        }
        Set<String> switchesA = switchesOf(chainA);
        Set<String> switchesB = switchesOf(chainB);
        Set<String> common = new HashSet<>(switchesA);
        common.retainAll(switchesB);
        if (common.isEmpty()) {
            // They meet at a root port without a switch between: only functions of one device do.
            return new TopoPath(PathKind.PIX, pci, 0);
        }
        int crossed = 1; // the lowest common switch
        for (String s : switchesA) {
            crossed += common.contains(s) ? 0 : 1;
        }
        for (String s : switchesB) {
            crossed += common.contains(s) ? 0 : 1;
        }
        return new TopoPath(crossed == 1 ? PathKind.PIX : PathKind.PXB, pci, 0);
    }

    /** Upstream ports of PCIe switches on a chain: bridges at odd depth below the root port. */
    private static Set<String> switchesOf(List<PciDevice> chain) {
        Set<String> out = new HashSet<>();
        int top = chain.size() - 1; // depth 0: the device on the root bus (usually the root port)
        for (int i = 0; i < chain.size(); i++) {
            int depth = top - i;
            PciDevice d = chain.get(i);
            if (depth % 2 == 1 && d.kind() == DeviceKind.BRIDGE) {
                out.add(d.busId());
            }
        }
        return out;
    }

    /** The slowest link below {@code meet} on a chain (every link up to the host bridge when null). */
    private static double slowestBelow(List<PciDevice> chain, String meet, boolean costDegradedLinks) {
        double slowest = Double.POSITIVE_INFINITY;
        for (PciDevice d : chain) {
            if (d.busId().equals(meet)) {
                break;
            }
            PciLink l = costDegradedLinks ? d.planningLink() : d.capableSpeedLink();
            if (l != null) {
                slowest = Math.min(slowest, l.bandwidthGBps());
            }
        }
        return slowest;
    }

    private List<PciDevice> ofKind(DeviceKind kind) {
        List<PciDevice> out = new ArrayList<>();
        for (PciDevice d : devices.values()) {
            if (d.kind() == kind) {
                out.add(d);
            }
        }
        return out;
    }

    private PciDevice require(String busId) {
        PciDevice d = devices.get(busId);
        if (d == null) {
            throw new IllegalArgumentException("no PCI device " + busId + " in this topology (GPUs: "
                    + busIds(gpus()) + ")");
        }
        return d;
    }

    private static String busIds(Collection<PciDevice> ds) {
        List<String> out = new ArrayList<>();
        for (PciDevice d : ds) {
            if (d.kind() == DeviceKind.GPU) {
                out.add(d.busId());
            }
        }
        return out.isEmpty() ? "none" : String.join(", ", out);
    }
}
