package org.sparkccl.arrow;

import org.sparkccl.core.memory.HostMemoryBlock;
import org.sparkccl.core.memory.HostMemorySource;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.ForeignAllocation;

/**
 * A {@link HostMemoryBlock} handed to an Arrow allocator: the allocator counts its bytes against its
 * limit, and frees the block (back to its source) when the last ArrowBuf over it is released.
 */
public final class ForeignHostAllocation extends ForeignAllocation {
    private final HostMemoryBlock block;

    private ForeignHostAllocation(HostMemoryBlock block) {
        super(block.size(), block.address());
        this.block = block;
    }

    /**
     * A buffer of {@code bytes} from {@code source}, accounted by {@code allocator}. If the
     * allocator refuses (over its limit, closed), the block goes straight back to the source.
     */
    public static ArrowBuf allocate(BufferAllocator allocator, HostMemorySource source, long bytes) {
        String why = source.unavailableReason();
        if (why != null) {
            throw new IllegalStateException("host memory source '" + source.name() + "' cannot allocate here: " + why);
        }
        return wrap(allocator, source.allocate(bytes));
    }

    /** {@code block} under {@code allocator}; if the allocator refuses, the block is freed at once. */
    public static ArrowBuf wrap(BufferAllocator allocator, HostMemoryBlock block) {
        try {
            return allocator.wrapForeignAllocation(new ForeignHostAllocation(block));
        } catch (RuntimeException | Error e) {
            block.close();
            throw e;
        }
    }

    @Override
    protected void release0() {
        block.close();
    }
}
