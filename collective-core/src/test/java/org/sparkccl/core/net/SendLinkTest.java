package org.sparkccl.core.net;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.Random;
import org.agrona.UnsafeApi;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.sparkccl.core.memory.HostStagingBuffer;
import org.sparkccl.core.jdk.JdkAccess;
import org.sparkccl.core.wait.WaitLoop;

/**
 * SendLink writes from the caller's memory: what the socket does not take at once is kept (copied
 * into a slot) and still arrives, in order, after the caller has overwritten its buffer.
 */
class SendLinkTest {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    private static final int FRAME = 16 << 20; // far more than the socket buffers hold while nobody reads

    @AfterEach
    void nothingLeaked() {
        SocketRanks.assertNothingLeaked();
    }

    @Test
    void framesTheSocketCouldNotTakeArriveIntactAfterTheCallerReusedItsBuffer() throws IOException {
        try (ServerSocketChannel server = ServerSocketChannel.open();
             HostStagingBuffer src = new HostStagingBuffer(FRAME);
             HostStagingBuffer expected = new HostStagingBuffer(2L * FRAME)) {
            server.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
            SocketChannel sending = SocketChannel.open(server.getLocalAddress());
            SocketChannel receiving = server.accept();
            WaitLoop wait = new WaitLoop(0, 100, 30_000, (peer, step, what) -> { }, () -> false);
            Random random = new Random(16);
            try (SendLink out = new SendLink(0, 1, sending, 2, FRAME)) {
                // Frame 0 straight from src (nobody reads yet: the socket takes only part of it);
                // frame 1, smaller, while frame 0's rest still waits: copied into a slot.
                int[] sizes = {FRAME, FRAME / 3};
                long offset = 0;
                for (int step = 0; step < sizes.length; step++) {
                    fill(src.address(), sizes[step], random);
                    UnsafeApi.copyMemory(src.address(), expected.address() + offset, sizes[step]);
                    out.send(wait, step, src.address(), sizes[step]);
                    assertEquals(step + 1, out.tail.get() - out.head.get(), "frames left to the writer thread after step " + step);
                    fill(src.address(), sizes[step], random); // the caller reuses its buffer at once
                    offset += sizes[step];
                }
                try (RecvLink in = new RecvLink(1, 0, receiving, 2, FRAME)) {
                    offset = 0;
                    for (int step = 0; step < sizes.length; step++) {
                        assertArrives(in, wait, step, expected.address() + offset, sizes[step], "frame " + step);
                        offset += sizes[step];
                    }
                }
            }
        }
    }

    @Test
    void aHeaderSentWithAStepGoesOutFirstInOneWriteOrIsKeptWithIt() throws IOException {
        int header = 64;
        try (ServerSocketChannel server = ServerSocketChannel.open();
             HostStagingBuffer src = new HostStagingBuffer(FRAME);
             HostStagingBuffer head = new HostStagingBuffer(header);
             HostStagingBuffer expected = new HostStagingBuffer(2L * FRAME + 2L * header)) {
            server.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
            SocketChannel sending = SocketChannel.open(server.getLocalAddress());
            SocketChannel receiving = server.accept();
            WaitLoop wait = new WaitLoop(0, 100, 30_000, (peer, step, what) -> { }, () -> false);
            Random random = new Random(17);
            // Step 0: a header and a small frame on an idle socket: both go out at once, nothing kept.
            // Step 1: a frame the socket takes only in part. Step 2: a header and a frame behind it:
            // both kept in slots, in order, while the caller reuses its buffers.
            int[] sizes = {4096, FRAME, FRAME / 3};
            boolean[] withHeader = {true, false, true};
            int[] keptAfter = {0, 1, 3};
            try (SendLink out = new SendLink(0, 1, sending, 3, FRAME)) {
                long offset = 0;
                for (int step = 0; step < sizes.length; step++) {
                    if (withHeader[step]) {
                        fill(head.address(), header, random);
                        UnsafeApi.copyMemory(head.address(), expected.address() + offset, header);
                        offset += header;
                    }
                    fill(src.address(), sizes[step], random);
                    UnsafeApi.copyMemory(src.address(), expected.address() + offset, sizes[step]);
                    out.send(wait, step, head.address(), withHeader[step] ? header : 0, src.address(), sizes[step], false);
                    assertEquals(keptAfter[step], out.tail.get() - out.head.get(), "frames left to the writer thread after step " + step);
                    fill(src.address(), sizes[step], random);
                    fill(head.address(), header, random);
                    offset += sizes[step];
                }
                try (RecvLink in = new RecvLink(1, 0, receiving, 3, FRAME)) {
                    offset = 0;
                    int frame = 0;
                    for (int step = 0; step < sizes.length; step++) {
                        if (withHeader[step]) {
                            assertArrives(in, wait, frame++, expected.address() + offset, header, "header of step " + step);
                            offset += header;
                        }
                        assertArrives(in, wait, frame++, expected.address() + offset, sizes[step], "step " + step);
                        offset += sizes[step];
                    }
                }
            }
        }
    }

    @Test
    void framesHandedToTheWriterArriveIntactWhenTheCallerReusesItsMemoryAfterSettling() throws IOException {
        try (ServerSocketChannel server = ServerSocketChannel.open();
             HostStagingBuffer first = new HostStagingBuffer(FRAME);
             HostStagingBuffer second = new HostStagingBuffer(FRAME);
             HostStagingBuffer expected = new HostStagingBuffer(2L * FRAME)) {
            server.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
            SocketChannel sending = SocketChannel.open(server.getLocalAddress());
            SocketChannel receiving = server.accept();
            WaitLoop wait = new WaitLoop(0, 100, 30_000, (peer, step, what) -> { }, () -> false);
            Random random = new Random(18);
            int small = FRAME / 3;
            try (SendLink out = new SendLink(0, 1, sending, 2, FRAME)) {
                // Nobody reads yet: the writer thread sends only part of each before the socket is full.
                fill(first.address(), FRAME, random);
                UnsafeApi.copyMemory(first.address(), expected.address(), FRAME);
                out.send(wait, 0, 0, 0, first.address(), FRAME, true);
                fill(second.address(), small, random);
                UnsafeApi.copyMemory(second.address(), expected.address() + FRAME, small);
                out.send(wait, 1, 0, 0, second.address(), small, true);
                // A write elsewhere keeps nothing; one into the first frame's memory keeps what is left of it.
                out.settleIfOverlaps(expected.address(), FRAME);
                out.settleIfOverlaps(first.address() + FRAME - 8, 8);
                fill(first.address(), FRAME, random);
                out.settle();
                fill(second.address(), small, random);
                try (RecvLink in = new RecvLink(1, 0, receiving, 2, FRAME)) {
                    assertArrives(in, wait, 0, expected.address(), FRAME, "first frame");
                    assertArrives(in, wait, 1, expected.address() + FRAME, small, "second frame");
                }
            }
        }
    }

    /** The next frame on {@code in} holds the {@code bytes} at {@code expected}. */
    private static void assertArrives(RecvLink in, WaitLoop wait, long step, long expected, int bytes, String what) {
        long got = in.acquire(wait, step, bytes);
        assertEquals(-1, firstDifference(got, expected, bytes), what + ": first byte offset that differs from what was sent");
        in.release();
    }

    /** Compares exactly {@code bytes}: a frame's length need not be a multiple of 8 (FRAME / 3 is not). */
    private static long firstDifference(long a, long b, int bytes) {
        int i = 0;
        for (; i + 8 <= bytes; i += 8) {
            if (UnsafeApi.getLong(a + i) != UnsafeApi.getLong(b + i)) {
                return i;
            }
        }
        for (; i < bytes; i++) {
            if (UnsafeApi.getByte(a + i) != UnsafeApi.getByte(b + i)) {
                return i;
            }
        }
        return -1;
    }

    private static void fill(long address, int bytes, Random random) {
        for (int i = 0; i < bytes; i += 8) {
            UnsafeApi.putLong(address + i, random.nextLong());
        }
    }
}
