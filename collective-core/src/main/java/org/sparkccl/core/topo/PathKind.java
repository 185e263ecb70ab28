package org.sparkccl.core.topo;

/**
 * How two devices reach each other, closest first, as NCCL (and {@code nvidia-smi topo -m}) name it.
 * The order matters: ring search prefers a closer kind when bandwidths tie.
 */
public enum PathKind {
    /** The same device (two ranks on one GPU). */
    LOC,
    /** NVLink, directly. */
    NVL,
    /** PCIe through at most one PCIe switch. */
    PIX,
    /** PCIe through several PCIe switches, without a host bridge. */
    PXB,
    /** PCIe through a PCIe host bridge (the CPU's root complex). */
    PHB,
    /** PCIe across host bridges of one NUMA node. */
    NODE,
    /** Across the SMP interconnect between NUMA nodes (QPI/UPI, Infinity Fabric). */
    SYS
}
