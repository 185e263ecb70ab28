package org.sparkccl.core.direct;

import org.sparkccl.core.CclException;
import org.sparkccl.core.SharedBuffer;
import org.sparkccl.core.transport.SharedRegion;

/**
 * One {@code allocateShared} call as this rank sees it: its own region and its views of every
 * peer's region of the same call. Closing it releases all of them (each counted by its transport);
 * the peers' memory stays theirs until they close their own.
 */
final class RegisteredBuffer implements SharedBuffer {
    /** Which allocateShared call of the communicator made it: the same number on every rank. */
    final int registration;
    /** {@code regions[r]}: rank r's region of this call (this rank's own included). */
    private final SharedRegion[] regions;
    private final long[] addresses;
    private final long[] sizes;
    private final int rank;
    private final Runnable onClose;
    private boolean closed;
    /**
     * Direct all-reduces running on this buffer now, and the latest of them: close() refuses while
     * one runs, since unmapping under it would crash the JVM (SIGSEGV) instead of failing the call.
     */
    private int users;
    private Object usedBy;

    RegisteredBuffer(int registration, int rank, SharedRegion[] regions, Runnable onClose) {
        this.registration = registration;
        this.rank = rank;
        this.regions = regions.clone();
        this.onClose = onClose;
        this.addresses = new long[regions.length];
        this.sizes = new long[regions.length];
        for (int r = 0; r < regions.length; r++) {
            addresses[r] = regions[r].address();
            sizes[r] = regions[r].size();
        }
    }

    @Override
    public long address() {
        return addresses[rank];
    }

    @Override
    public long size() {
        return sizes[rank];
    }

    /** Whether {@code [address, address + bytes)} lies in this rank's buffer. */
    boolean contains(long address, long bytes) {
        return !closed && address >= addresses[rank] && bytes >= 0 && address - addresses[rank] <= sizes[rank] - bytes;
    }

    /** Rank {@code r}'s buffer mapped here, or 0 when this rank has closed it. */
    long addressOf(int r) {
        return closed ? 0 : addresses[r];
    }

    long sizeOf(int r) {
        return sizes[r];
    }

    boolean closed() {
        return closed;
    }

    /** A collective starts reading or writing this buffer; it must call {@link #endUse} after. */
    synchronized void startUse(Object call) {
        if (closed) {
            throw new CclException("rank " + rank + ": " + call + " uses " + this + ", which another thread closed"
                    + " just now; close shared buffers only after the collectives on them have returned");
        }
        users++;
        usedBy = call;
    }

    synchronized void endUse() {
        users--;
    }

    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        if (users > 0) {
            throw new CclException("rank " + rank + ": cannot close " + this + " while " + usedBy + " uses it on"
                    + " another thread; it stays open: close it after that call returns");
        }
        closed = true;
        RuntimeException first = null;
        for (SharedRegion region : regions) {
            try {
                region.close();
            } catch (RuntimeException e) {
                if (first == null) {
                    first = e;
                } else {
                    first.addSuppressed(e);
                }
            }
        }
        onClose.run();
        if (first != null) {
            throw first;
        }
    }

    @Override
    public String toString() {
        return "shared buffer #" + registration + " of rank " + rank + " (" + sizes[rank] + " bytes)";
    }
}
