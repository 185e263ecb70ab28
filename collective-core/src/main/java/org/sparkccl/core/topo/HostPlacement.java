package org.sparkccl.core.topo;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.BitSet;
import java.util.List;
import org.sparkccl.core.param.Params;

/**
 * Where a rank of the host engine runs: the CPUs its thread may run on and the NUMA node that holds
 * most of them (-1 where unknown). Each rank sends its own in the init round, so that every rank
 * orders the ring from the same facts ({@link HostRings}).
 */
public record HostPlacement(int numaNode, String cpuList) {
    private static final Path THREAD_STATUS = Path.of("/proc/thread-self/status");

    /**
     * The calling thread's placement: its CPUs from {@code /proc/thread-self/status} (a thread bound
     * with {@code sched_setaffinity} shows its own set), the NUMA nodes from the topology file's
     * {@code numa} lines where {@code SPARKCCL_TOPO_FILE} is set, else from sysfs.
     */
    public static HostPlacement observe(Params params) {
        return of(numaNodes(params), allowedCpusOfThisThread());
    }

    /** The node holding most of {@code cpuList} (the lowest on a tie); -1 when no node holds any. */
    public static HostPlacement of(List<NumaNode> nodes, String cpuList) {
        BitSet cpus = CpuList.parse(cpuList);
        int best = -1;
        int most = 0;
        for (NumaNode n : nodes) {
            BitSet shared = CpuList.parse(n.cpuList());
            shared.and(cpus);
            if (shared.cardinality() > most) {
                most = shared.cardinality();
                best = n.id();
            }
        }
        return new HostPlacement(best, CpuList.format(cpus));
    }

    /** The lowest CPU this rank may run on; -1 when unknown. */
    public int firstCpu() {
        return CpuList.parse(cpuList).nextSetBit(0);
    }

    /** True when the two ranks may run on a CPU in common. */
    public boolean sharesCpus(HostPlacement other) {
        return CpuList.parse(cpuList).intersects(CpuList.parse(other.cpuList));
    }

    public byte[] encode() {
        byte[] cpus = cpuList.getBytes(StandardCharsets.US_ASCII);
        return ByteBuffer.allocate(4 + cpus.length).putInt(numaNode).put(cpus).array();
    }

    public static HostPlacement decode(byte[] data, int rank) {
        if (data == null || data.length < 4) {
            throw new IllegalArgumentException("the placement of rank " + rank + " is missing or damaged: use the same"
                    + " sparkccl jar on every executor");
        }
        ByteBuffer b = ByteBuffer.wrap(data);
        int node = b.getInt();
        return new HostPlacement(node, new String(data, 4, data.length - 4, StandardCharsets.US_ASCII));
    }

    private static List<NumaNode> numaNodes(Params params) {
        if (!params.get(Params.TOPO_FILE).isBlank()) {
            return TopologySource.load(params).numaNodes();
        }
        try {
            return SysfsReader.readNumaNodes(TopologySource.DEFAULT_SYSFS);
        } catch (IOException | RuntimeException e) {
            return List.of(); // no sysfs (not Linux, or hidden in a container): every rank alike
        }
    }

    private static String allowedCpusOfThisThread() {
        try {
            for (String line : Files.readAllLines(THREAD_STATUS, StandardCharsets.US_ASCII)) {
                if (line.startsWith("Cpus_allowed_list:")) {
                    return line.substring(line.indexOf(':') + 1).trim();
                }
            }
        } catch (IOException | RuntimeException e) {
            // Not Linux, or /proc not mounted: no CPUs known, every rank alike.
        }
        return "";
    }
}
