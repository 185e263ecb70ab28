package org.sparkccl.core.topo;

/** What a PCI function in the model is; everything else in sysfs is left out. */
public enum DeviceKind {
    /** An NVIDIA GPU: class 0x0300 (VGA) or 0x0302 (3D controller), vendor 0x10de. */
    GPU,
    /** A network controller: class 0x0200 (Ethernet) or 0x0207 (InfiniBand). */
    NIC,
    /** A PCI-to-PCI bridge, class 0x0604: a root port or a port of a PCIe switch. */
    BRIDGE,
    /** Anything else that lies on the way to a GPU or NIC. */
    OTHER;

    public static final int NVIDIA_VENDOR = 0x10de;

    /** Classifies by sysfs' 24-bit class code (base class, subclass, interface) and the vendor id. */
    public static DeviceKind of(int classCode, int vendor) {
        int baseAndSub = classCode >>> 8;
        if ((baseAndSub == 0x0300 || baseAndSub == 0x0302) && vendor == NVIDIA_VENDOR) {
            return GPU;
        }
        if (baseAndSub == 0x0200 || baseAndSub == 0x0207) {
            return NIC;
        }
        if (baseAndSub == 0x0604) {
            return BRIDGE;
        }
        return OTHER;
    }
}
