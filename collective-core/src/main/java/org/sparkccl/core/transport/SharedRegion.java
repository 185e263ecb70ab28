package org.sparkccl.core.transport;

import org.agrona.concurrent.AtomicBuffer;

/**
 * Memory that more than one rank reads and writes: a rank's own exposed region, or a peer's region
 * opened by this rank. Closing unmaps (or frees) it; it is accounted by the transport that made it.
 */
public interface SharedRegion extends AutoCloseable {
    /** The whole region, with atomic accessors (acquire/release in the method names). */
    AtomicBuffer buffer();

    default long address() {
        return buffer().addressOffset();
    }

    default long size() {
        return buffer().capacity();
    }

    @Override
    void close();
}
