package org.sparkccl.core;

/**
 * Host memory that every rank of a communicator has mapped, made by the collective
 * {@link Communicator#allocateShared}: the CPU analogue of NCCL's {@code ncclMemAlloc} plus
 * {@code ncclCommRegister}. An all-reduce whose send and receive buffers lie in such memory on
 * every rank can read the peers' buffers directly instead of copying through staging slots.
 * Closing it unmaps this rank's view of its own and its peers' buffers; it is counted by the
 * transport that made it, and nothing of it is left in /dev/shm once every rank has closed it (or
 * died).
 */
public interface SharedBuffer extends AutoCloseable {
    /** Start of this rank's buffer. */
    long address();

    /** Bytes this rank asked for. */
    long size();

    @Override
    void close();
}
