package org.sparkccl.core.proto;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.agrona.UnsafeApi;
import org.junit.jupiter.api.Test;
import org.sparkccl.core.DataType;
import org.sparkccl.core.jdk.JdkAccess;
import org.sparkccl.core.ReduceOp;

class LayoutTest {

    @Test
    void llWordPutsDataBeforeFlagInMemory() {
        long word = LlLayout.word(0x11223344, 7);
        ByteBuffer b = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(0, word);
        assertEquals(0x11223344, b.getInt(0), "bytes 0-3 are data");
        assertEquals(7, b.getInt(4), "bytes 4-7 are the flag");
        assertEquals(0x11223344, LlLayout.data(word));
        assertEquals(7, LlLayout.flag(word));
        assertEquals(-1, LlLayout.data(LlLayout.word(-1, 3)), "negative data does not leak into the flag");
        assertEquals(3, LlLayout.flag(LlLayout.word(-1, 3)));
    }

    @Test
    void llFlagsNeverMatchZeroedMemoryOrTheSlotsPreviousUse() {
        assertNotEquals(0, LlLayout.flagOfStep(0));
        for (long step = 0; step < 100; step++) {
            assertNotEquals(LlLayout.flagOfStep(step), LlLayout.flagOfStep(step - ChannelLayout.STEPS));
        }
        assertEquals(16, LlLayout.wireBytes(5));
        assertEquals(8, LlLayout.wireBytes(4));
    }

    @Test
    void channelCountersSitOnSeparateLinesAndSlotsDoNotOverlap() {
        ChannelLayout c = new ChannelLayout(256 << 10, 1 << 20);
        assertTrue(ChannelLayout.SIMPLE_HEAD_OFFSET - ChannelLayout.LL_HEAD_OFFSET >= 128);
        assertTrue(ChannelLayout.SIMPLE_TAIL_OFFSET - ChannelLayout.SIMPLE_HEAD_OFFSET >= 128);
        assertTrue(ChannelLayout.SLOTS_OFFSET >= ChannelLayout.SIMPLE_TAIL_OFFSET + 128);
        assertEquals(c.llSlotOffset(0) + c.llSlotBytes(), c.llSlotOffset(1));
        assertEquals(c.llSlotOffset(7) + c.llSlotBytes(), c.simpleSlotOffset(0));
        assertEquals(c.llSlotOffset(0), c.llSlotOffset(8), "step 8 reuses slot 0");
        assertTrue(c.simpleSlotOffset(7) + c.simpleSlotBytes() <= c.channelBytes());
        assertEquals(0, c.channelBytes() % 4096);
        assertEquals(c.llSlotBytes() / 2, c.llSlotDataBytes());
        SegmentLayout s = new SegmentLayout(c, 3);
        assertEquals(SegmentLayout.CONTROL_BYTES + 3L * c.channelBytes(), s.totalBytes());
        assertThrows(IllegalArgumentException.class, () -> new ChannelLayout(64, 1 << 20));
    }

    @Test
    void oneShotSlotsFollowTheChannelsAndHoldHeaderAndData() {
        ChannelLayout c = new ChannelLayout(256 << 10, 1 << 20);
        OneShotLayout o = new OneShotLayout(1000);
        SegmentLayout s = new SegmentLayout(c, 2, o, false);
        assertEquals(s.channelOffset(2), s.oneShotOffset());
        assertEquals(s.oneShotOffset() + (long) o.totalBytes(), s.totalBytes());
        assertEquals(0, o.slotOffset(0));
        assertEquals(o.slotOffset(0), o.slotOffset(2), "use 2 reuses slot 0");
        assertTrue(o.slotOffset(1) >= OneShotLayout.DATA_OFFSET + 1000);
        assertEquals(2L * o.slotOffset(1), o.totalBytes());
        assertTrue(OneShotLayout.HEADER_OFFSET - OneShotLayout.FLAG_OFFSET >= 64, "the flag has a cache line of its own");
        assertTrue(OneShotLayout.DATA_OFFSET - OneShotLayout.HEADER_OFFSET >= CollectiveHeader.BYTES);
        assertEquals(0, OneShotLayout.DATA_OFFSET % 64, "data starts on a cache line");
        assertEquals(0, new OneShotLayout(0).totalBytes());
        assertEquals(new SegmentLayout(c, 2).totalBytes() + o.totalBytes(), s.totalBytes());
    }

    @Test
    void directAreaEndsTheSegmentWithEachFlagOnItsOwnLine() {
        ChannelLayout c = new ChannelLayout(256 << 10, 1 << 20);
        OneShotLayout o = new OneShotLayout(1000);
        SegmentLayout with = new SegmentLayout(c, 2, o, true);
        SegmentLayout without = new SegmentLayout(c, 2, o, false);
        assertEquals(without.totalBytes(), with.directOffset());
        assertEquals(with.directOffset() + DirectLayout.BYTES, with.totalBytes());
        assertEquals(0, with.directOffset() % 64, "the area starts on a cache line");
        int[] flags = {DirectLayout.ARRIVE_FLAG_OFFSET, DirectLayout.DONE_FLAG_OFFSET, DirectLayout.CHUNK_COUNTER_OFFSET};
        for (int i = 0; i < flags.length; i++) {
            assertEquals(0, flags[i] % 64);
            for (int j = i + 1; j < flags.length; j++) {
                assertTrue(Math.abs(flags[i] - flags[j]) >= 64, "flags share a cache line");
            }
        }
        assertTrue(DirectLayout.SEND_REGISTRATION_OFFSET >= DirectLayout.HEADER_OFFSET + CollectiveHeader.BYTES);
        assertTrue(DirectLayout.RECV_OFFSET_OFFSET + 8 <= DirectLayout.DONE_FLAG_OFFSET);
        assertTrue(DirectLayout.CHUNK_COUNTER_OFFSET + 8 <= DirectLayout.BYTES);
    }

    @Test
    void headerRoundTripsAndRefusesGarbage() {
        JdkAccess.ensureAgronaAccess();
        long at = UnsafeApi.allocateMemory(CollectiveHeader.BYTES);
        try {
            CollectiveHeader h = new CollectiveHeader(5, CollectiveHeader.Kind.BROADCAST, DataType.BFLOAT16,
                    ReduceOp.MAX, Protocol.SIMPLE, 3, (4L << 32) + 3);
            h.write(at);
            CollectiveHeader back = CollectiveHeader.read(at);
            assertTrue(h.sameCall(back));
            assertEquals("broadcast #5 (count 17179869187, bfloat16, root 3, proto Simple)", back.describe());
            assertTrue(!h.sameCall(new CollectiveHeader(5, CollectiveHeader.Kind.BROADCAST, DataType.BFLOAT16,
                    ReduceOp.MAX, Protocol.SIMPLE, 3, 4)));
            UnsafeApi.putInt(at + 8, 99);
            assertNull(CollectiveHeader.read(at));
        } finally {
            UnsafeApi.freeMemory(at);
        }
    }
}
