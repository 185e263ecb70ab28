package org.sparkccl.core.transport;

/**
 * A way for ranks to share memory, as NCCL's transports: a receiver exposes a region before the
 * bootstrap round, puts its blob in its description, and a sender opens it afterwards. The first
 * transport in a communicator's list that is available exposes; a peer connects through it when
 * {@link #cannotConnectReason} says nothing against it.
 */
public interface MemoryTransport extends AutoCloseable {
    /** Short name for logs and descriptions: {@code SHM}, {@code LOCAL}. */
    String name();

    /** Null when this process can expose memory through this transport; otherwise why not. */
    String unavailableReason();

    /** Null when {@code me} can open memory that {@code peer} exposed through this transport; otherwise why not. */
    String cannotConnectReason(RankInfo me, RankInfo peer);

    /** Creates a zero-filled region of {@code bytes}. */
    ExposedRegion expose(long bytes, String label);

    /** Opens a peer's region from its blob. */
    SharedRegion open(byte[] connectBlob, RankInfo owner);

    /** Removes what a dead process of this host left behind (segments named after its pid). */
    default void cleanUpAfter(long deadPid) {
    }

    /** Bytes this transport has mapped or allocated and not yet released: tests assert it returns to 0. */
    long outstandingBytes();

    @Override
    default void close() {
    }
}
