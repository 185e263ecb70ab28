package org.sparkccl.train;

import org.sparkccl.arrow.GradientBuffer;
import org.sparkccl.core.memory.HostMemorySource;
import org.sparkccl.core.memory.HostMemorySources;
import org.sparkccl.core.memory.SharedHostMemorySource;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.MemoryKind;
import org.sparkccl.core.ReduceOp;

/** The two collectives training needs, over a communicator or, for the single-process reference, over nothing. */
public interface StepCollectives {
    int rank();

    int size();

    /** In place: the sum over ranks. */
    void allReduceSum(GradientBuffer buffer);

    /** In place: rank 0's values on every rank. */
    void broadcastFromRank0(GradientBuffer buffer);

    /**
     * Where a CPU engine allocates its gradient buffer (every rank at the same point: allocating
     * may be collective): the memory these collectives reduce fastest.
     */
    default HostMemorySource gradientMemory() {
        return HostMemorySources.preferred();
    }

    /**
     * Over {@code comm}, in place on the buffers' memory: host addresses for a host communicator;
     * for a GPU one, the device pointers of the buffers' mapped pinned memory (the trainer
     * allocates from HostMemorySources.preferred(), which is pinned where a GPU is usable).
     */
    static StepCollectives over(Communicator comm) {
        return new StepCollectives() {
            @Override
            public int rank() {
                return comm.rank();
            }

            @Override
            public int size() {
                return comm.size();
            }

            @Override
            public void allReduceSum(GradientBuffer buffer) {
                buffer.allReduce(comm, ReduceOp.SUM);
            }

            @Override
            public void broadcastFromRank0(GradientBuffer buffer) {
                buffer.broadcast(comm, 0);
            }

            @Override
            public HostMemorySource gradientMemory() {
                // A host communicator's shared buffers: large gradient all-reduces then read the
                // peers' buffers in place (the direct all-reduce) instead of staging every byte.
                // Over TCP alone (one rank per host) there are none.
                return comm.memoryKind() == MemoryKind.HOST && comm.canAllocateShared() ? new SharedHostMemorySource(comm)
                        : HostMemorySources.preferred();
            }
        };
    }

    /** One rank: sums and broadcasts leave the buffer as it is. */
    static StepCollectives singleProcess() {
        return new StepCollectives() {
            @Override
            public int rank() {
                return 0;
            }

            @Override
            public int size() {
                return 1;
            }

            @Override
            public void allReduceSum(GradientBuffer buffer) {
            }

            @Override
            public void broadcastFromRank0(GradientBuffer buffer) {
            }
        };
    }
}
