package org.sparkccl.core;

/**
 * How ranks find each other, once, when a communicator is built. Spark implements it on
 * {@code BarrierTaskContext.allGather}; {@link TcpBootstrap} implements it for tools and tests
 * that run without Spark. No collective ever goes through a bootstrap: building a communicator
 * costs exactly one {@link #allGather} round.
 *
 * <p>Every rank must make the same calls in the same order.
 */
public interface Bootstrap extends AutoCloseable {
    int rank();

    int size();

    /** Returns every rank's bytes, indexed by rank; {@code result[rank()]} is {@code mine}. */
    byte[][] allGather(byte[] mine);

    void barrier();

    @Override
    default void close() {
    }
}
