package org.sparkccl.tools.perf;

import org.sparkccl.core.Communicator;
import org.sparkccl.core.DataType;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.check.ReferenceCheck;

/**
 * The benchmark's send and receive buffers in the communicator's memory (host or GPU), and how
 * checked data gets into and out of them: the timing loop only ever sees two addresses.
 */
interface PerfMemory extends AutoCloseable {
    long send();

    long recv();

    /** Writes this rank's reference input for {@code count} elements at {@code target} (send or recv). */
    void fill(ReferenceCheck data, int rank, long target, long count);

    /** Compares {@code count} reduced elements at {@code target} with the reference. */
    ReferenceCheck.Result check(ReferenceCheck reference, long target, long count);

    /** All-reduces one 8-byte value (its raw bits) through {@code comm}: the slowest time, the wrong count. */
    long allReduceBits(Communicator comm, long bits, DataType type, ReduceOp op);

    @Override
    void close();
}
