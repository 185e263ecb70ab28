package org.sparkccl.core.topo;

import java.util.BitSet;

/** The kernel's CPU list text ({@code 0-31,64-95}, as in {@code cpulist} and {@code Cpus_allowed_list}) as a set. */
public final class CpuList {
    private CpuList() {
    }

    /** The CPUs the text names; empty for blank text. */
    public static BitSet parse(String text) {
        BitSet cpus = new BitSet();
        for (String part : text.split(",")) {
            String p = part.trim();
            if (p.isEmpty()) {
                continue;
            }
            int dash = p.indexOf('-');
            try {
                int from = Integer.parseInt((dash < 0 ? p : p.substring(0, dash)).trim());
                int to = dash < 0 ? from : Integer.parseInt(p.substring(dash + 1).trim());
                if (from < 0 || to < from) {
                    throw new IllegalArgumentException("bad CPU range '" + p + "' in CPU list '" + text + "'");
                }
                cpus.set(from, to + 1);
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("bad CPU list '" + text + "': '" + p + "' is not a CPU or a range", e);
            }
        }
        return cpus;
    }

    /** The set as the kernel writes it: ranges joined by commas. */
    public static String format(BitSet cpus) {
        StringBuilder b = new StringBuilder();
        for (int from = cpus.nextSetBit(0); from >= 0; ) {
            int to = cpus.nextClearBit(from) - 1;
            b.append(b.length() == 0 ? "" : ",").append(from);
            if (to > from) {
                b.append('-').append(to);
            }
            from = cpus.nextSetBit(to + 1);
        }
        return b.toString();
    }
}
