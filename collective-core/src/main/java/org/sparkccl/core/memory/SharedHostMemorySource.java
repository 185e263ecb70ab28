package org.sparkccl.core.memory;

import java.util.concurrent.atomic.AtomicLong;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.MemoryKind;
import org.sparkccl.core.SharedBuffer;

/**
 * Host memory that every rank of a host communicator maps ({@link Communicator#allocateShared}),
 * so that all-reduces of gradient buffers made from it read the peers' buffers in place (the
 * direct all-reduce) instead of copying through staging slots. Allocating is collective: every
 * rank must allocate the same buffers in the same order, between the same collectives (a trainer
 * whose ranks all build the same model does). Not found by {@link HostMemorySources}: it needs the
 * communicator.
 */
public final class SharedHostMemorySource implements HostMemorySource {
    public static final String NAME = "shared";

    private final Communicator comm;
    private final AtomicLong outstanding = new AtomicLong();

    public SharedHostMemorySource(Communicator comm) {
        this.comm = comm;
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public String unavailableReason() {
        return comm.memoryKind() == MemoryKind.HOST ? null
                : "rank " + comm.rank() + "'s communicator works on " + comm.memoryKind() + " memory, not host memory";
    }

    @Override
    public HostMemoryBlock allocate(long bytes) {
        if (bytes <= 0) {
            throw new IllegalArgumentException("host memory block size must be positive, got " + bytes);
        }
        // Shared buffers start on a page in /dev/shm but only 16-byte aligned between threads of one JVM.
        int align = OffHeapMemorySource.ALIGNMENT;
        SharedBuffer shared = comm.allocateShared(bytes + align - 1);
        long aligned = (shared.address() + align - 1) & -align;
        return new AccountedBlock(aligned, bytes, outstanding, shared::close);
    }

    @Override
    public long outstandingBytes() {
        return outstanding.get();
    }

    @Override
    public String toString() {
        return NAME;
    }
}
