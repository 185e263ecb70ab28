package org.sparkccl.core.topo;

/**
 * A NUMA node: {@code /sys/devices/system/node/nodeN}.
 *
 * @param cpuList the kernel's cpulist text, {@code 0-31,64-95}
 */
public record NumaNode(int id, String cpuList) {

    /** The number of CPUs in the list. */
    public int cpuCount() {
        return CpuList.parse(cpuList).cardinality();
    }
}
