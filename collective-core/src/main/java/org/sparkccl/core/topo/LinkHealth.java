package org.sparkccl.core.topo;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.sparkccl.core.log.CclLog;
import org.sparkccl.core.log.Subsys;

/**
 * The health of each GPU's PCIe link, for a warning at communicator init: a link trained below its
 * capability (not one idling at 2.5 GT/s, see {@link PciDevice#planningLink()}) slows every ring hop
 * through it, and non-zero AER counters mean the link has been retrying or failing transfers.
 */
public final class LinkHealth {
    private LinkHealth() {
    }

    /** One warning per GPU whose link is degraded or whose AER counters are non-zero, in bus-id order. */
    public static List<String> warnings(Topology t) {
        List<String> out = new ArrayList<>();
        for (PciDevice gpu : t.gpus()) {
            List<String> problems = new ArrayList<>();
            if (gpu.linkDegraded()) {
                problems.add(linkProblem(gpu));
            }
            if (gpu.aerTotal() > 0) {
                problems.add(aerProblem(gpu));
            }
            if (!problems.isEmpty()) {
                out.add("GPU " + gpu.busId() + ": " + String.join("; ", problems));
            }
        }
        return out;
    }

    /** The warning for one GPU, as {@link #warnings} words it; null where its link is healthy or unknown. */
    public static String warning(Topology t, String busId) {
        for (String w : warnings(t)) {
            if (w.startsWith("GPU " + busId + ":")) {
                return w;
            }
        }
        return null;
    }

    /** Logs each of {@link #warnings} at WARN (INIT). */
    public static void log(Topology t, CclLog log) {
        for (String w : warnings(t)) {
            log.warn(Subsys.INIT, "%s", w);
        }
    }

    private static String linkProblem(PciDevice gpu) {
        PciLink now = gpu.link();
        PciLink max = gpu.maxLink();
        boolean slower = now.gigaTransfersPerSecond() < max.gigaTransfersPerSecond() && !gpu.linkIdleDownclocked();
        String fix = "reseat the card, check the riser"
                + (gpu.linkNarrowerThanCapability() ? ", check the BIOS bifurcation setting of its slot (lanes)" : "")
                + (slower ? ", check the BIOS PCIe speed (generation) setting of its slot" : "");
        return String.format(Locale.ROOT, "PCIe link runs at %s (%s GB/s), below its capability of %s (%s GB/s);"
                        + " rings count it at the lower rate. Likely fix: %s", now, RingPlanner.gbps(now.bandwidthGBps()),
                max, RingPlanner.gbps(max.bandwidthGBps()), fix);
    }

    private static String aerProblem(PciDevice gpu) {
        List<String> counters = new ArrayList<>();
        for (Map.Entry<String, Long> e : gpu.aer().entrySet()) {
            if (e.getValue() != 0 && !e.getKey().contains(".TOTAL_")) {
                counters.add(e.getKey() + "=" + e.getValue());
            }
        }
        return "AER counters non-zero since boot (" + String.join(" ", counters) + ", total " + gpu.aerTotal()
                + "): the link has had transfer errors. Likely fix: check the slot and the cabling (riser cable),"
                + " and whether the counters keep growing (sparkccl-topo shows them)";
    }
}
