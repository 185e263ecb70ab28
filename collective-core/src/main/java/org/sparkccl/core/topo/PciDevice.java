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

    /** True when the link runs slower or narrower than it can (a GPU in power saving does this when idle). */
    public boolean linkBelowCapability() {
        return link != null && maxLink != null
                && (link.gigaTransfersPerSecond() < maxLink.gigaTransfersPerSecond() || link.width() < maxLink.width());
    }

    /** True when the link has fewer lanes than it can: unlike the speed, this does not recover under load. */
    public boolean linkNarrowerThanCapability() {
        return link != null && maxLink != null && link.width() < maxLink.width();
    }

    /**
     * The link the ring search counts on: the speed the link is capable of (GPUs drop their speed when
     * idle, and ranks that read sysfs at different moments must still agree) and the lanes in use.
     */
    PciLink planningLink() {
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
