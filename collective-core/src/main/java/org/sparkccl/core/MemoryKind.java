package org.sparkccl.core;

/** Where the addresses handed to a communicator point. */
public enum MemoryKind {
    /** Host memory: off-heap, direct buffers, shared memory. */
    HOST,
    /** CUDA device memory of the rank's GPU. */
    DEVICE
}
