package org.sparkccl.core.proto;

import org.sparkccl.core.DataType;
import org.sparkccl.core.ReduceOp;

/**
 * What a ring algorithm needs from a protocol, as NCCL's primitives: each moves {@code bytes}
 * through this rank's ring position, receiving from the predecessor and sending to the successor.
 * Sender and receiver split the bytes into slots the same way, so calls on neighbouring ranks pair
 * up step by step. {@code finish} completes AVG (divides by the rank count) on the rank that
 * computes a chunk's final value.
 */
public interface Primitives {
    /** Sets the element type and op of the collective that follows. */
    void begin(DataType type, ReduceOp op, int nranks);

    void send(long src, long bytes);

    void recv(long dst, long bytes);

    /** next = prev op src. */
    void recvReduceSend(long src, long bytes);

    /** dst = next = prev op src. */
    void recvReduceCopySend(long src, long dst, long bytes, boolean finish);

    /** dst = prev op src. */
    void recvReduceCopy(long src, long dst, long bytes, boolean finish);

    /** dst = next = prev. */
    void recvCopySend(long dst, long bytes);
}
