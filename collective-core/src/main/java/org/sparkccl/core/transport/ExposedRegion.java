package org.sparkccl.core.transport;

/** A region this rank created for its peers to open: its connect blob goes in the rank's description. */
public interface ExposedRegion extends SharedRegion {
    /** Fixed-size, versioned bytes that let a peer open this region with {@link MemoryTransport#open}. */
    byte[] connectBlob();

    /**
     * Called once every peer has opened the region: removes its name (e.g. unlinks the /dev/shm file)
     * so that nothing is left behind if a process dies later. The memory stays mapped.
     */
    void unlinkName();
}
