package org.sparkccl.core.bootstrap;

import org.sparkccl.core.Bootstrap;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.DataType;
import org.sparkccl.core.memory.HostStagingBuffer;

/**
 * A bootstrap whose rounds are collectives of a communicator that is already built: how the ranks
 * of one host build their shared-memory communicator once the one real bootstrap round is spent and
 * they can reach each other over sockets. {@link #allGather} takes two collectives (the lengths,
 * then the bytes padded to the longest).
 */
public final class CommunicatorBootstrap implements Bootstrap {
    private final Communicator comm;

    public CommunicatorBootstrap(Communicator comm) {
        this.comm = comm;
    }

    @Override
    public int rank() {
        return comm.rank();
    }

    @Override
    public int size() {
        return comm.size();
    }

    @Override
    public byte[][] allGather(byte[] mine) {
        int n = comm.size();
        int[] lengths = new int[n];
        try (HostStagingBuffer one = new HostStagingBuffer(4); HostStagingBuffer all = new HostStagingBuffer(4L * n)) {
            one.copyIn(new int[] {mine.length}, 4);
            comm.allGather(one.address(), all.address(), 1, DataType.INT32);
            all.copyOut(lengths, 4L * n);
        }
        int longest = 0;
        for (int length : lengths) {
            longest = Math.max(longest, length);
        }
        byte[] padded = java.util.Arrays.copyOf(mine, longest);
        byte[] gathered = new byte[longest * n];
        try (HostStagingBuffer in = new HostStagingBuffer(Math.max(1, longest));
             HostStagingBuffer out = new HostStagingBuffer(Math.max(1, (long) longest * n))) {
            in.copyIn(padded, longest);
            comm.allGather(in.address(), out.address(), longest, DataType.UINT8);
            out.copyOut(gathered, gathered.length);
        }
        byte[][] result = new byte[n][];
        for (int r = 0; r < n; r++) {
            result[r] = java.util.Arrays.copyOfRange(gathered, r * longest, r * longest + lengths[r]);
        }
        return result;
    }

    @Override
    public void barrier() {
        comm.barrier();
    }
}
