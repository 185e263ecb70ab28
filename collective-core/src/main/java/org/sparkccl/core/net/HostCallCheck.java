package org.sparkccl.core.net;

import org.sparkccl.core.CclException;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.DataType;
import org.sparkccl.core.memory.HostStagingBuffer;
import org.sparkccl.core.proto.CollectiveHeader;

/**
 * Every rank of a host gathers every other's header of a two-level call and compares: the parts of a
 * call that the host's ranks run together could match where the calls do not (counts 1000 and 1001
 * over two ranks both make shards of 500). Across hosts the socket rings compare it.
 */
public final class HostCallCheck {
    private HostCallCheck() {
    }

    /**
     * A collective of {@code hostLevel} (host memory; the ranks of this host, numbered by local index as
     * {@code hostRanks} lists their global ranks): throws on this rank where another rank of the host
     * called something else.
     */
    public static void check(Communicator hostLevel, CollectiveHeader call, int rank, int[] hostRanks) {
        int h = CollectiveHeader.BYTES;
        int perHost = hostRanks.length;
        try (HostStagingBuffer headers = new HostStagingBuffer((long) h * (perHost + 1))) {
            long mine = headers.address() + (long) h * perHost;
            call.write(mine);
            hostLevel.allGather(mine, headers.address(), h, DataType.UINT8);
            for (int l = 0; l < perHost; l++) {
                if (!CollectiveHeader.sameBytes(mine, headers.address() + (long) l * h)) {
                    CollectiveHeader theirs = CollectiveHeader.read(headers.address() + (long) l * h);
                    throw new CclException("rank " + rank + ": collective mismatch: this rank called two-level "
                            + call.describe() + " but rank " + hostRanks[l] + " (on this host) called "
                            + (theirs == null ? "something unreadable" : "two-level " + theirs.describe())
                            + "; every rank must make the same collective calls, in the same order, with the same"
                            + " count, type and op");
                }
            }
        }
    }
}
