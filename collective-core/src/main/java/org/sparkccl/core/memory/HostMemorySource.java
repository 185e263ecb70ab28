package org.sparkccl.core.memory;

/**
 * Where {@link GradientBuffer}s get their host memory: plain off-heap memory
 * ({@link OffHeapMemorySource}), or, where CUDA is present, page-locked (pinned) memory that GPUs
 * can copy from at full speed. Either way the block is brought under an Arrow
 * {@code BufferAllocator} as a {@code ForeignAllocation} (see {@link ForeignHostAllocation}), so it
 * is counted and its leaks caught like any Arrow memory.
 *
 * <p>Implementations are found with {@link java.util.ServiceLoader} (a line in
 * {@code META-INF/services/org.sparkccl.core.memory.HostMemorySource}); {@link HostMemorySources#preferred()}
 * picks the available one with the highest {@link #priority()}. An implementation must have a
 * public no-argument constructor that does not touch native libraries: checks belong in
 * {@link #unavailableReason()}, so that a machine without a GPU never loads CUDA.
 */
public interface HostMemorySource {
    /** Short name for logs: {@code offheap}, {@code cuda-pinned}. */
    String name();

    /** Null when {@link #allocate} can work in this process; otherwise why not. */
    String unavailableReason();

    /** A block of at least {@code bytes} (> 0), 64-byte aligned, contents unspecified. */
    HostMemoryBlock allocate(long bytes);

    /** Bytes allocated and not yet freed through this source: tests assert it returns to 0. */
    long outstandingBytes();

    /** Higher wins in {@link HostMemorySources#preferred()}; plain off-heap memory is 0. */
    default int priority() {
        return 0;
    }
}
