package org.sparkccl.core.net;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.sparkccl.core.PeerFailedException;
import org.sparkccl.core.jdk.JdkAccess;

/**
 * An abort frame says how many collectives its sender completed ({@link SocketLink#FRAME_ABORT}):
 * a rank still in one of those calls is not failed by it while it waits for other peers, and fails
 * at its next call or wherever it needs the aborted peer's data. This is what keeps a task that Spark
 * kills between two collectives from failing the last one on ranks that had not finished it yet.
 */
class AbortAfterCompletedCallTest {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    private static final long COMPLETED = 5;

    @AfterEach
    void nothingLeaked() {
        SocketRanks.assertNothingLeaked();
    }

    @Test
    void aDirectLinkKeepsAnAbortAfterACallThisRankIsStillIn() throws Exception {
        SocketChannel[] pair = connectedPair();
        try (DirectLink aborting = new DirectLink(1, 0, pair[0], 1024); DirectLink waiting = new DirectLink(0, 1, pair[1], 1024)) {
            aborting.sendControl(1, COMPLETED, "rank 1: task 7 was killed by Spark (test)");
            // In call 5, which the peer completed: kept while this rank waits for another partner.
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
            while (!waiting.readSome(false, -1, COMPLETED)) {
                assertTrue(System.nanoTime() < until, "the abort frame did not arrive");
            }
            assertFalse(waiting.readSome(false, -1, COMPLETED), "kept, not thrown, within call " + COMPLETED);
            // Needed now (its frame awaited) or in the next call: thrown, with the peer's reason.
            PeerFailedException awaited = assertThrows(PeerFailedException.class,
                    () -> waiting.readSome(true, 16, COMPLETED));
            assertTrue(awaited.getMessage().contains("killed by Spark (test)"), awaited.getMessage());
            assertThrows(PeerFailedException.class, () -> waiting.readSome(false, -1, COMPLETED + 1));
        }
    }

    @Test
    void aDirectLinkThrowsAnAbortFromAPeerThatDidNotCompleteThisCall() throws Exception {
        SocketChannel[] pair = connectedPair();
        try (DirectLink aborting = new DirectLink(1, 0, pair[0], 1024); DirectLink waiting = new DirectLink(0, 1, pair[1], 1024)) {
            aborting.sendControl(1, COMPLETED - 1, "rank 1: failed inside call " + COMPLETED);
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
            PeerFailedException e = assertThrows(PeerFailedException.class, () -> {
                while (System.nanoTime() < until) {
                    waiting.readSome(false, -1, COMPLETED);
                }
            });
            assertTrue(e.getMessage().contains("inside call " + COMPLETED), e.getMessage());
        }
    }

    @Test
    void aRingLinkFailedOnlyAfterTheCallsItsPeerCompleted() throws Exception {
        SocketChannel[] pair = connectedPair();
        try (SendLink out = new SendLink(1, 0, pair[0], 2, 1024); RecvLink in = new RecvLink(0, 1, pair[1], 2, 1024)) {
            out.abort(1, COMPLETED, "rank 1: task 7 was killed by Spark (test)");
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
            while (in.failure == null) {
                assertTrue(System.nanoTime() < until, "the abort frame did not arrive");
                Thread.sleep(1);
            }
            assertTrue(in.failedAfter(COMPLETED), "call " + COMPLETED + " may still finish");
            assertFalse(in.failedAfter(COMPLETED + 1), "the next call fails");
        }
    }

    /** Two ends of one loopback TCP connection; the links built on them close them. */
    private static SocketChannel[] connectedPair() throws IOException {
        try (ServerSocketChannel server = ServerSocketChannel.open()) {
            server.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
            SocketChannel near = SocketChannel.open(server.getLocalAddress());
            return new SocketChannel[] {near, server.accept()};
        }
    }
}
