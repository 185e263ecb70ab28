package org.sparkccl.core.topo;

/**
 * The path between two devices: its kind, its bandwidth in GB/s in one direction (the slowest link
 * on it), and the NVLink count for {@link PathKind#NVL} (0 otherwise).
 */
public record TopoPath(PathKind kind, double bandwidthGBps, int nvLinks) {

    /** As {@code nvidia-smi topo -m} writes it: {@code NV18}, {@code PIX}, {@code SYS}. */
    public String label() {
        return kind == PathKind.NVL ? "NV" + nvLinks : kind == PathKind.LOC ? "X" : kind.name();
    }
}
