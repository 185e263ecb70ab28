package org.sparkccl.core.topo;

/**
 * A PCIe host bridge (root complex): sysfs' {@code /sys/devices/pci0000:17}. Its NUMA node is the one
 * its devices report; -1 where the platform does not say.
 */
public record HostBridge(String name, int numaNode) {
}
