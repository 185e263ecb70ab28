package org.sparkccl.core.topo;

/**
 * A NUMA node: {@code /sys/devices/system/node/nodeN}.
 *
 * @param cpuList the kernel's cpulist text, {@code 0-31,64-95}
 */
public record NumaNode(int id, String cpuList) {

    /** The number of CPUs in the list. */
    public int cpuCount() {
        int count = 0;
        for (String part : cpuList.split(",")) {
            String p = part.trim();
            if (p.isEmpty()) {
                continue;
            }
            int dash = p.indexOf('-');
            count += dash < 0 ? 1 : Integer.parseInt(p.substring(dash + 1)) - Integer.parseInt(p.substring(0, dash)) + 1;
        }
        return count;
    }
}
