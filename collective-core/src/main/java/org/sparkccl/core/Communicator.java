package org.sparkccl.core;

import java.lang.ref.Reference;
import java.nio.ByteBuffer;
import org.agrona.DirectBuffer;

/**
 * A group of ranks that run collectives together, as an NCCL communicator. Every rank calls the
 * same collectives in the same order with the same count, type and op; a rank that does not fails
 * on every rank with a message naming both calls. Buffers are given by address ({@link #memoryKind()}
 * says whether host or device), with overloads for direct buffers, Agrona buffers and Java arrays.
 * Send and receive addresses may be equal (in place). Whoever passes a raw address keeps the memory
 * behind it alive until the call returns (e.g. {@code Reference.reachabilityFence} on its buffer).
 *
 * <p>Not thread safe: one thread per rank calls it, as with NCCL.
 */
public interface Communicator extends AutoCloseable {

    int rank();

    int size();

    MemoryKind memoryKind();

    /**
     * Where the ranks are and how they talk, in a few words for logs: {@code one host: 4 ranks, SHM},
     * {@code two-level: 2 hosts x 2 ranks, SHM inside, TCP across}, ... The same on every rank.
     */
    default String layout() {
        return size() + " rank(s)";
    }

    /** {@code recv[i] = op over ranks of send[i]}, for {@code count} elements, on every rank. */
    void allReduce(long sendAddress, long recvAddress, long count, DataType type, ReduceOp op);

    /** {@code send} holds {@code size() * recvCount} elements; rank r receives the reduced block r. */
    void reduceScatter(long sendAddress, long recvAddress, long recvCount, DataType type, ReduceOp op);

    /** {@code recv} receives {@code size() * sendCount} elements: block r is rank r's {@code send}. */
    void allGather(long sendAddress, long recvAddress, long sendCount, DataType type);

    /** Copies root's {@code send} into every rank's {@code recv}; {@code send} is read on root only. */
    void broadcast(long sendAddress, long recvAddress, long count, DataType type, int root);

    /** Returns once every rank has entered it. */
    void barrier();

    /** Scratch memory of this communicator's kind, for the array overloads. */
    StagingBuffer allocateStaging(long bytes);

    /**
     * Collective (every rank calls it, in the same order among the collectives): allocates
     * {@code bytes} (may differ between ranks) of memory that every peer maps. All-reduces whose
     * send and receive buffers lie in such memory on every rank may then read the peers' buffers in
     * place (see {@link SharedBuffer}). A rank that cannot allocate makes it fail on every rank.
     */
    default SharedBuffer allocateShared(long bytes) {
        throw new UnsupportedOperationException("rank " + rank() + ": " + getClass().getSimpleName()
                + " cannot allocate shared buffers; use the host communicator, or allocateStaging for plain memory");
    }

    /** Whether {@link #allocateShared} works here (callers choose their memory by it, every rank alike). */
    default boolean canAllocateShared() {
        return false;
    }

    /**
     * Marks this rank failed for a reason outside its collectives (Spark: its task failed or was
     * killed between them), so that peers waiting on it fail at once naming this rank and
     * {@code reason} instead of later and vaguer; the communicator is unusable afterwards and must
     * still be closed. Does nothing once closed, if a collective of this rank failed already (peers
     * know), or where the engine has no way to tell its peers (the default): they learn it when this
     * rank closes. Not to be called while another thread closes the communicator.
     */
    default void abort(String reason) {
    }

    @Override
    void close();

    // ---- Convenience overloads. -----------------------------------------------------------

    /** In place on a direct buffer (host communicators): from position to limit. */
    default void allReduce(ByteBuffer buffer, DataType type, ReduceOp op) {
        long address = BufferAddresses.address(buffer) + buffer.position();
        allReduce(address, address, BufferAddresses.count(buffer.remaining(), type), type, op);
        // The collective used only the address: keep the buffer (and its memory) alive until here.
        Reference.reachabilityFence(buffer);
    }

    default void allReduce(ByteBuffer send, ByteBuffer recv, DataType type, ReduceOp op) {
        long count = BufferAddresses.count(send.remaining(), type);
        BufferAddresses.requireCapacity(recv.remaining(), count, type, "receive buffer");
        allReduce(BufferAddresses.address(send) + send.position(),
                BufferAddresses.address(recv) + recv.position(), count, type, op);
        Reference.reachabilityFence(send);
        Reference.reachabilityFence(recv);
    }

    /** In place on an Agrona buffer over off-heap memory: the whole capacity. */
    default void allReduce(DirectBuffer buffer, DataType type, ReduceOp op) {
        long address = BufferAddresses.address(buffer);
        allReduce(address, address, BufferAddresses.count(buffer.capacity(), type), type, op);
        Reference.reachabilityFence(buffer);
    }

    default void allReduce(float[] data, ReduceOp op) {
        allReduceArray(data, data.length, DataType.FLOAT32, op);
    }

    default void allReduce(double[] data, ReduceOp op) {
        allReduceArray(data, data.length, DataType.FLOAT64, op);
    }

    default void allReduce(int[] data, ReduceOp op) {
        allReduceArray(data, data.length, DataType.INT32, op);
    }

    default void allReduce(long[] data, ReduceOp op) {
        allReduceArray(data, data.length, DataType.INT64, op);
    }

    /** Bytes as int8. */
    default void allReduce(byte[] data, ReduceOp op) {
        allReduceArray(data, data.length, DataType.INT8, op);
    }

    /** In place on a Java array holding {@code count} elements of {@code type} (e.g. a short[] of half). */
    default void allReduceArray(Object array, long count, DataType type, ReduceOp op) {
        long bytes = count * type.size();
        try (StagingBuffer staging = allocateStaging(Math.max(bytes, 1))) {
            staging.copyIn(array, bytes);
            allReduce(staging.address(), staging.address(), count, type, op);
            staging.copyOut(array, bytes);
        }
    }

    /** Broadcast in place of a Java array from {@code root}. */
    default void broadcastArray(Object array, long count, DataType type, int root) {
        long bytes = count * type.size();
        try (StagingBuffer staging = allocateStaging(Math.max(bytes, 1))) {
            staging.copyIn(array, bytes);
            broadcast(staging.address(), staging.address(), count, type, root);
            staging.copyOut(array, bytes);
        }
    }
}
