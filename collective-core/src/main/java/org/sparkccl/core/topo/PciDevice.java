package org.sparkccl.core.topo;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * One PCI function of the model.
 *
 * @param busId    bus id, {@code 0000:19:00.0}
 * @param parent   the bus id of the bridge above it, or the host bridge's name ({@code pci0000:17})
 *                 for a device on a root bus
 * @param numaNode from sysfs; -1 where the platform does not say
 * @param link     the link as it runs now; null where unknown or down
 * @param maxLink  what the link can do; null where unknown
 * @param aer      AER counters by {@code correctable.RxErr}, {@code fatal.TOTAL_ERR_FATAL}, ...;
 *                 empty where the kernel has no AER files for it
 */
public record PciDevice(String busId, String parent, DeviceKind kind, int classCode, int vendor, int deviceId,
                        int numaNode, PciLink link, PciLink maxLink, Map<String, Long> aer) {

    public PciDevice {
        aer = Collections.unmodifiableMap(new LinkedHashMap<>(aer));
    }

    /**
     * The rate a PCIe link drops to when its device saves power (ASPM / dynamic link speed): the
     * Gen1 rate. NVIDIA GPUs idle there, and the switch ports above them follow.
     */
    public static final double IDLE_GTPS = 2.5;

    /** True when the link runs slower or narrower than it can, for whatever reason (idle or degraded). */
    public boolean linkBelowCapability() {
        return link != null && maxLink != null
                && (link.gigaTransfersPerSecond() < maxLink.gigaTransfersPerSecond() || link.width() < maxLink.width());
    }

    /** True when the link has fewer lanes than it can: unlike the speed, this does not recover under load. */
    public boolean linkNarrowerThanCapability() {
        return link != null && maxLink != null && link.width() < maxLink.width();
    }

    /**
     * True when the link sits at {@link #IDLE_GTPS} while it can run faster: what power saving does,
     * and the link speeds up again under load. sysfs cannot tell this apart from a link that trained
     * at Gen1 for good; the tool says to look again under load.
     */
    public boolean linkIdleDownclocked() {
        return link != null && maxLink != null && link.gigaTransfersPerSecond() <= IDLE_GTPS
                && maxLink.gigaTransfersPerSecond() > IDLE_GTPS;
    }

    /**
     * True when the link runs below capability for a reason that does not go away under load: fewer
     * lanes than it has, or a speed below its capability but above the idle rate (a link trained
     * down, e.g. 8 GT/s on a 16 GT/s GPU: a bad seat, a riser, a BIOS speed setting).
     */
    public boolean linkDegraded() {
        return linkNarrowerThanCapability() || (linkBelowCapability() && !linkIdleDownclocked());
    }

    /**
     * The link the ring search counts on. The lanes in use always count: a narrow link stays narrow.
     * The speed is the current one, except where the link idles at {@link #IDLE_GTPS}: then it is the
     * capable speed, because the link speeds up as soon as traffic flows, and ranks that read sysfs
     * at different moments (one GPU busy, one idle) must still agree on the rings. A speed below
     * capability but above the idle rate is a link trained down; it stays there under load, so it is
     * costed as it runs (8 GT/s x8 on a 16 GT/s x16 GPU: 7.9 GB/s, not the 31.5 of its capable speed).
     */
    PciLink planningLink() {
        if (maxLink == null) {
            return link;
        }
        if (link == null) {
            return maxLink;
        }
        return linkIdleDownclocked() ? new PciLink(maxLink.gigaTransfersPerSecond(), link.width()) : link;
    }

    /** The link at its capable speed with the lanes in use: what {@code SPARKCCL_AVOID_SLOW_LINKS=0} costs. */
    PciLink capableSpeedLink() {
        if (maxLink == null) {
            return link;
        }
        return link == null ? maxLink : new PciLink(maxLink.gigaTransfersPerSecond(), link.width());
    }

    /** The sum of the AER {@code TOTAL_*} counters, or -1 without AER files. */
    public long aerTotal() {
        if (aer.isEmpty()) {
            return -1;
        }
        long total = 0;
        for (Map.Entry<String, Long> e : aer.entrySet()) {
            if (e.getKey().contains(".TOTAL_")) {
                total += e.getValue();
            }
        }
        return total;
    }
}
