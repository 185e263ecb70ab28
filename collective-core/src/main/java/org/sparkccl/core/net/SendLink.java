package org.sparkccl.core.net;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import org.sparkccl.core.PeerFailedException;
import org.sparkccl.core.wait.WaitLoop;

/**
 * The sending side of one connection: the rank's thread fills slots ({@link #acquire}, {@link #publish}),
 * the writer thread sends them in order and frees them. After an abort it sends the abort frame once
 * every slot before it went out; on close, the close frame.
 */
final class SendLink extends SocketLink {
    private final ByteBuffer frameHeader = ByteBuffer.allocateDirect(12);
    private volatile byte[] abortMessage;
    private volatile int abortOrigin;

    SendLink(int rank, int peer, SocketChannel channel, int steps, int slotBytes) {
        super(rank, peer, channel, steps, slotBytes);
        start("sparkccl-rank" + rank + "-send-to-" + peer);
    }

    /** Address of the next slot to fill, once the writer has freed it. */
    long acquire(WaitLoop wait, long step) {
        long t = tail.get();
        if (t - head.get() >= steps) {
            while (t - head.get() >= steps) {
                checkFailure();
                wait.idle(peer, step, "room to send to " + peerName);
            }
            wait.done();
        }
        return slotAddress(t);
    }

    /** Hands the acquired slot, holding {@code bytes}, to the writer. */
    void publish(int bytes) {
        long t = tail.get();
        lengths[(int) (t % steps)] = bytes;
        tail.set(t + 1);
        wakeIoThread();
    }

    /** Tells the peer, after what was already published, that this rank failed and why. */
    void abort(int originRank, String message) {
        if (abortMessage == null) {
            abortOrigin = originRank;
            abortMessage = message.getBytes(StandardCharsets.UTF_8);
            wakeIoThread();
        }
    }

    @Override
    void run() {
        int idle = 0;
        try {
            while (true) {
                long h = head.get();
                if (tail.get() == h) {
                    byte[] abort = abortMessage;
                    if (abort != null) {
                        frameHeader.clear();
                        frameHeader.putInt(FRAME_ABORT).putInt(abortOrigin).putInt(abort.length).flip();
                        writeFully(frameHeader, ByteBuffer.wrap(abort));
                        return;
                    }
                    if (stopping) {
                        frameHeader.clear();
                        frameHeader.putInt(FRAME_CLOSE).flip();
                        writeFully(frameHeader);
                        return;
                    }
                    ioIdle(idle++);
                    continue;
                }
                idle = 0;
                int s = (int) (h % steps);
                ByteBuffer data = slots[s];
                data.clear().limit(lengths[s]);
                frameHeader.clear();
                frameHeader.putInt(lengths[s]).flip();
                writeFully(frameHeader, data);
                head.set(h + 1);
            }
        } catch (IOException | RuntimeException e) {
            if (!stopping) {
                failure = new PeerFailedException(peer, "rank " + rank + ": sending to " + peerName + " failed (" + e
                        + "): that rank died, closed its communicator or its host dropped the connection; this"
                        + " communicator is unusable: every rank must start again with a new one");
            }
        }
    }
}
