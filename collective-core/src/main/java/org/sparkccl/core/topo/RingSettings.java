package org.sparkccl.core.topo;

import java.nio.charset.StandardCharsets;
import org.sparkccl.core.CclException;
import org.sparkccl.core.param.Params;

/**
 * The settings that decide a communicator's rings besides what the ranks gathered:
 * {@code SPARKCCL_RINGS} and {@code SPARKCCL_AVOID_SLOW_LINKS}. Each rank sends its own in the init
 * round and every rank checks that all agree: ranks that computed different rings would each wait
 * for a predecessor that never writes to them.
 */
public record RingSettings(String rings, boolean avoidSlowLinks) {

    public static RingSettings of(Params params) {
        return new RingSettings(params.get(Params.RINGS).trim(), params.get(Params.AVOID_SLOW_LINKS));
    }

    public byte[] encode() {
        return ((avoidSlowLinks ? "1" : "0") + rings).getBytes(StandardCharsets.UTF_8);
    }

    public static RingSettings decode(byte[] data, int rank) {
        if (data == null || data.length == 0 || (data[0] != '0' && data[0] != '1')) {
            throw new IllegalArgumentException("the ring settings of rank " + rank + " are missing or damaged: use the"
                    + " same sparkccl jar on every executor");
        }
        return new RingSettings(new String(data, 1, data.length - 1, StandardCharsets.UTF_8), data[0] == '1');
    }

    /** Fails on rank {@code myRank}, naming the first rank whose settings differ from its own. */
    public static void requireSame(RingSettings[] byRank, int myRank) {
        RingSettings mine = byRank[myRank];
        for (int r = 0; r < byRank.length; r++) {
            if (!byRank[r].equals(mine)) {
                throw new CclException("rank " + myRank + ": rank " + r + " has " + byRank[r].describe() + " but this rank "
                        + mine.describe() + ": the ranks would build different rings and wait for each other forever;"
                        + " set SPARKCCL_RINGS and SPARKCCL_AVOID_SLOW_LINKS alike on every rank");
            }
        }
    }

    private String describe() {
        return "SPARKCCL_RINGS='" + rings + "' SPARKCCL_AVOID_SLOW_LINKS=" + (avoidSlowLinks ? 1 : 0);
    }
}
