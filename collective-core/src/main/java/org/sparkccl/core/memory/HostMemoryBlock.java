package org.sparkccl.core.memory;

/** A block of host memory from a {@link HostMemorySource}: freed, back to its source, by {@link #close()}. */
public interface HostMemoryBlock extends AutoCloseable {
    /** Address of the first byte; at least 64-byte aligned, as Arrow recommends. */
    long address();

    long size();

    /**
     * The address GPU kernels use for this memory (mapped pinned memory), or 0 where GPUs cannot
     * reach it in place.
     */
    default long devicePointer() {
        return 0;
    }

    /**
     * Frees the block. Called by the Arrow allocator when the last ArrowBuf over it is released, and
     * by its owner when the allocator was closed too early to do so: must be idempotent.
     */
    @Override
    void close();
}
