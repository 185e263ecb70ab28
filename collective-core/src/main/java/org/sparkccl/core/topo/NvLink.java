package org.sparkccl.core.topo;

/**
 * NVLink between two GPUs: {@code links} links of {@code gbpsPerLink} GB/s each per direction (25 for
 * NVLink 2 to 4: V100, A100, H100/H200; 50 for NVLink 5). sysfs cannot show NVLink, so it comes from a
 * topology file or from the GPU layer at runtime.
 */
public record NvLink(String busIdA, String busIdB, int links, double gbpsPerLink) {
    public static final double DEFAULT_GBPS_PER_LINK = 25.0;

    public NvLink {
        if (links <= 0 || !(gbpsPerLink > 0)) {
            throw new IllegalArgumentException("NVLink " + busIdA + " - " + busIdB + " needs a positive link count and rate, got "
                    + links + " x " + gbpsPerLink + " GB/s");
        }
        if (busIdA.equals(busIdB)) {
            throw new IllegalArgumentException("NVLink from " + busIdA + " to itself");
        }
    }

    public boolean joins(String a, String b) {
        return (busIdA.equals(a) && busIdB.equals(b)) || (busIdA.equals(b) && busIdB.equals(a));
    }

    public double bandwidthGBps() {
        return links * gbpsPerLink;
    }
}
