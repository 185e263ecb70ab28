package org.sparkccl.core.proto;

import java.util.Locale;

/**
 * Wire protocols, with the names SPARKCCL_PROTO takes: LL for latency, Simple for bandwidth, LL128 (GPUs
 * only, over NVLink or within one GPU) for the sizes between. The ordinal travels in the collective header.
 */
public enum Protocol {
    LL("LL"), SIMPLE("Simple"), LL128("LL128");

    private final String displayName;

    Protocol(String displayName) {
        this.displayName = displayName;
    }

    public String displayName() {
        return displayName;
    }

    public static Protocol fromName(String name) {
        for (Protocol p : values()) {
            if (p.displayName.equalsIgnoreCase(name.trim())) {
                return p;
            }
        }
        throw new IllegalArgumentException("unknown protocol '" + name + "': use LL, LL128, Simple or auto");
    }

    @Override
    public String toString() {
        return displayName.toUpperCase(Locale.ROOT);
    }
}
