package org.sparkccl.core.shm;

import java.util.function.Consumer;
import org.sparkccl.core.transport.ExposedRegion;

/**
 * The owner's handle on a segment it created. Closing it removes the name from /dev/shm at once
 * (peers that have not opened it yet are too late), and the memory once every handle of this JVM
 * on it is closed.
 */
final class ShmExposedRegion extends ShmRegion implements ExposedRegion {
    private final byte[] blob;
    private final Runnable onUnlink;

    ShmExposedRegion(ShmSegment segment, String label, byte[] blob, Runnable onUnlink, Consumer<ShmRegion> onClose) {
        super(segment, label, onClose);
        this.blob = blob.clone();
        this.onUnlink = onUnlink;
    }

    @Override
    public byte[] connectBlob() {
        return blob.clone();
    }

    @Override
    public void unlinkName() {
        if (segment.removeName()) {
            onUnlink.run();
        }
    }

    @Override
    void closeName() {
        segment.removeName();
    }
}
