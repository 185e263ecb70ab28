package org.sparkccl.core;

/**
 * Scratch memory in a communicator's own memory space (host or device), used to run collectives on
 * Java arrays. Primitive arrays only; {@code bytes} counts bytes from the start of the array.
 */
public interface StagingBuffer extends AutoCloseable {
    /** The address collectives take: a host address or a device pointer. */
    long address();

    long size();

    void copyIn(Object javaArray, long bytes);

    void copyOut(Object javaArray, long bytes);

    @Override
    void close();
}
