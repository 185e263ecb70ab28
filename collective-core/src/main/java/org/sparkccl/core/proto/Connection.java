package org.sparkccl.core.proto;

import org.agrona.concurrent.AtomicBuffer;
import org.sparkccl.core.wait.WaitLoop;

/**
 * One channel's link through this rank: the receive side lives in this rank's own segment (the
 * predecessor writes into it), the send side in the successor's segment. Step counters run on
 * across collectives, so that LL flags never repeat and slots rotate without a reset handshake.
 */
public final class Connection {
    final ChannelLayout layout;
    final AtomicBuffer recvBuffer;
    final int recvBase;
    final AtomicBuffer sendBuffer;
    final int sendBase;
    final int prevRank;
    final int nextRank;
    final WaitLoop wait;
    long llSendStep;
    long llRecvStep;
    long simpleSendStep;
    long simpleRecvStep;

    public Connection(ChannelLayout layout, AtomicBuffer recvBuffer, int recvBase, AtomicBuffer sendBuffer,
                      int sendBase, int prevRank, int nextRank, WaitLoop wait) {
        this.layout = layout;
        this.recvBuffer = recvBuffer;
        this.recvBase = recvBase;
        this.sendBuffer = sendBuffer;
        this.sendBase = sendBase;
        this.prevRank = prevRank;
        this.nextRank = nextRank;
        this.wait = wait;
    }

    public WaitLoop waitLoop() {
        return wait;
    }

    /** Waits until the successor has consumed slot use {@code step - STEPS}, so slot {@code step} is free. */
    void waitForFreeSlot(int headOffset, long step, String what) {
        long needed = step - ChannelLayout.STEPS + 1;
        int at = sendBase + headOffset;
        if (sendBuffer.getLongAcquire(at) < needed) {
            while (sendBuffer.getLongAcquire(at) < needed) {
                wait.idle(nextRank, step, what);
            }
            wait.done();
        }
    }
}
