package org.sparkccl.core.shm;

import java.util.function.Consumer;
import org.agrona.concurrent.AtomicBuffer;
import org.agrona.concurrent.UnsafeBuffer;
import org.sparkccl.core.jdk.JdkAccess;
import org.sparkccl.core.transport.SharedRegion;

/** One rank's handle on a shared-memory segment: a peer's region it opened, or (subclass) its own. */
class ShmRegion implements SharedRegion {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    final ShmSegment segment;
    final String label;
    private final UnsafeBuffer buffer;
    private final Consumer<ShmRegion> onClose;
    private boolean closed;

    /** Takes over one reference on {@code segment}. */
    ShmRegion(ShmSegment segment, String label, Consumer<ShmRegion> onClose) {
        this.segment = segment;
        this.label = label;
        this.buffer = segment.newBuffer();
        this.onClose = onClose;
    }

    @Override
    public AtomicBuffer buffer() {
        return buffer;
    }

    /** The segment's file name in /dev/shm. */
    public String segmentName() {
        return segment.name;
    }

    @Override
    public void close() {
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
        }
        try {
            closeName();
        } finally {
            segment.release();
            onClose.accept(this);
        }
    }

    /** Hook for the owner's handle: removes the name before the memory goes. */
    void closeName() {
    }

    @Override
    public String toString() {
        return label + " (" + segment.name + ", " + segment.bytes + " bytes)";
    }
}
