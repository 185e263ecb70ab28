package org.sparkccl.ipc.gpu;

import org.sparkccl.core.CclException;
import org.sparkccl.core.proto.CollectiveHeader;
import org.sparkccl.ipc.cuda.CudaDevice;
import org.sparkccl.ipc.cuda.CudaEvent;
import org.sparkccl.ipc.cuda.CudaStream;

/**
 * What a GPU communicator keeps about its stream-ordered calls. The stream the last one went to: a
 * call queued on another stream first waits (on the GPU) for the work queued there, so the
 * communicator's kernels run one after the other whatever streams the caller uses, and a blocking call
 * first waits (on the host) for it. And the recent calls by ticket, so that a failure found later,
 * when nobody waits, names the call that failed.
 *
 * <p>Kernels replayed from a CUDA graph are not seen here: the caller orders graph launches with its
 * other calls on this communicator (same stream, or a synchronize in between).
 */
final class StreamCalls implements AutoCloseable {
    /** Tickets remembered for error messages (a power of two). */
    private static final int REMEMBERED = 1024;

    private final CudaDevice device;
    private final String where;
    private final CollectiveHeader[] recent = new CollectiveHeader[REMEMBERED];
    private CudaStream last;
    private CudaEvent handoff;

    StreamCalls(CudaDevice device, String where) {
        this.device = device;
        this.where = where;
    }

    /** Orders a call about to be queued on {@code stream} after every stream-ordered call before it. */
    void before(CudaStream stream) {
        if (last != null && last != stream && !last.isClosed()) {
            if (handoff == null) {
                handoff = new CudaEvent(device, where);
            }
            handoff.record(last);
            stream.waitFor(handoff);
        }
        last = stream;
    }

    /** Remembers the call just queued ({@code header.sequence} is its ticket). */
    void queued(CollectiveHeader header) {
        recent[header.sequence & (REMEMBERED - 1)] = header;
    }

    /** The call queued with {@code ticket}, or null when it is no longer remembered. */
    CollectiveHeader call(int ticket) {
        CollectiveHeader h = recent[ticket & (REMEMBERED - 1)];
        return h != null && h.sequence == ticket ? h : null;
    }

    /** True while stream-ordered calls may be queued that nobody has waited for. */
    boolean pending() {
        return last != null;
    }

    /**
     * Waits until every stream-ordered call queued so far has ended: a blocking call ({@code what}) runs
     * after them, and close frees nothing they use.
     */
    void drain(String what) {
        CudaStream s = last;
        last = null;
        if (s == null || s.isClosed()) {
            return;
        }
        if (s.isCapturing()) {
            throw new CclException(what + " waits for the stream-ordered calls before it, but they are being captured"
                    + " into a CUDA graph: end the capture first (or make this call stream-ordered on that stream)");
        }
        s.synchronize();
    }

    /** The caller waited for {@code stream}: the calls queued there have ended. */
    void synchronizedWith(CudaStream stream) {
        if (last == stream) {
            last = null;
        }
    }

    @Override
    public void close() {
        if (handoff != null) {
            handoff.close();
            handoff = null;
        }
    }
}
