package org.sparkccl.arrow;

/** A block of host memory from a {@link HostMemorySource}: freed, back to its source, by {@link #close()}. */
public interface HostMemoryBlock extends AutoCloseable {
    /** Address of the first byte; at least 64-byte aligned, as Arrow recommends. */
    long address();

    long size();

    /** Frees the block; called once, by the Arrow allocator when the last ArrowBuf over it is released. */
    @Override
    void close();
}
