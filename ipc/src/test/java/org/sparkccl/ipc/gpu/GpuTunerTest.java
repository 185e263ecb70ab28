package org.sparkccl.ipc.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import org.junit.jupiter.api.Test;
import org.sparkccl.core.DataType;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.proto.ChannelLayout;
import org.sparkccl.core.proto.CollectiveHeader.Kind;
import org.sparkccl.core.proto.Protocol;

/** The GPU tuner's protocol choice, without a GPU: LL128 only where the communicator offers it. */
class GpuTunerTest {
    private static final ChannelLayout LAYOUT = new ChannelLayout(256L << 10, 4L << 20);
    private static final GpuLl128Layout LL128 = new GpuLl128Layout(32, 512L << 10);

    private static GpuTuner tuner(Map<String, String> settings, GpuLl128Layout ll128, int n) {
        return tuner(settings, ll128, GpuCostModel.Link.NVLINK, n);
    }

    private static GpuTuner tuner(Map<String, String> settings, GpuLl128Layout ll128, GpuCostModel.Link link, int n) {
        return new GpuTuner(Params.defaults().withOverrides(settings), LAYOUT, 32, 0, ll128, link, n);
    }

    private static Protocol protocol(GpuTuner t, long bytes, int n) {
        return t.plan(Kind.ALL_REDUCE, bytes / 4, DataType.FLOAT32, n).protocol;
    }

    /** With LL128 connections the tuner runs LL128 exactly where the cost model says it beats LL and Simple. */
    @Test
    void withLl128TheTunerFollowsTheCostModel() {
        for (int n : new int[] {2, 4, 8}) {
            boolean anyBand = false;
            for (GpuCostModel.Link link : GpuCostModel.Link.values()) {
                long[] band = GpuCostModel.ll128Band(link, n);
                anyBand |= band[0] < band[1];
            }
            assertEquals(anyBand, GpuCostModel.ll128EverWins(n), "connections are made where the model may pick LL128");
        }
        for (GpuCostModel.Link link : GpuCostModel.Link.values()) {
            for (int n : new int[] {2, 4, 8}) {
                GpuTuner t = tuner(Map.of(), LL128, link, n);
                for (long bytes = 4; bytes <= (1L << 30); bytes *= 2) {
                    boolean ll128Wins = GpuCostModel.timeNs(Protocol.LL128, link, bytes, n)
                            < Math.min(GpuCostModel.timeNs(Protocol.LL, link, bytes, n),
                            GpuCostModel.timeNs(Protocol.SIMPLE, link, bytes, n));
                    assertEquals(ll128Wins, protocol(t, bytes, n) == Protocol.LL128, link + ", " + n + " ranks, " + bytes
                            + " bytes: " + t.describe());
                }
            }
        }
    }

    /**
     * One-shot blocks: one per 2 KB up to the 16 that programmatic dependent launch takes, 16 up to 128 KB,
     * then one per 8 KB, at most one per channel (32 here); SPARKCCL_ONESHOT_BLOCK_BYTES moves the first step.
     */
    @Test
    void oneShotBlocksStayWithinTheEarlyLaunchUpTo128Kb() {
        GpuTuner t = new GpuTuner(Params.defaults(), LAYOUT, 32, 4L << 20, null, GpuCostModel.Link.NVLINK, 2);
        long[][] want = {{8, 1}, {2048, 1}, {2052, 2}, {8 << 10, 4}, {32 << 10, 16}, {64 << 10, 16}, {128 << 10, 16},
            {(128 << 10) + 4, 17}, {256 << 10, 32}, {2 << 20, 32}};
        for (long[] w : want) {
            GpuPlan plan = t.plan(Kind.ALL_REDUCE, w[0] / 4, DataType.FLOAT32, 2);
            assertTrue(plan.oneShot, plan::toString);
            assertEquals(w[1], plan.channels, w[0] + " bytes: " + plan);
            assertTrue(plan.threads <= GpuTuner.THREADS, plan::toString);
        }
        GpuTuner four = new GpuTuner(Params.defaults().withOverrides(Map.of("SPARKCCL_ONESHOT_BLOCK_BYTES", "4K")), LAYOUT, 32,
                4L << 20, null, GpuCostModel.Link.NVLINK, 2);
        assertEquals(2, four.plan(Kind.ALL_REDUCE, 2048, DataType.FLOAT32, 2).channels);
    }

    /** Equal costs at a crossover, and crossovers that grow in proportion to the number of ranks. */
    @Test
    void crossoversScaleWithTheRanks() {
        for (GpuCostModel.Link link : GpuCostModel.Link.values()) {
            long two = GpuCostModel.crossoverBytes(Protocol.LL, Protocol.SIMPLE, link, 2);
            assertTrue(two > 0 && two < Long.MAX_VALUE, link + ": " + two);
            assertEquals(4 * two, GpuCostModel.crossoverBytes(Protocol.LL, Protocol.SIMPLE, link, 8), 4);
            assertEquals(GpuCostModel.timeNs(Protocol.LL, link, two, 2), GpuCostModel.timeNs(Protocol.SIMPLE, link, two, 2),
                    1.0);
        }
        // NVLink adds to every step, Simple's most: its crossover with LL moves up.
        assertTrue(GpuCostModel.crossoverBytes(Protocol.LL, Protocol.SIMPLE, GpuCostModel.Link.NVLINK, 2)
                > GpuCostModel.crossoverBytes(Protocol.LL, Protocol.SIMPLE, GpuCostModel.Link.ONE_GPU, 2));
    }

    /** Over PCIe or staged hops the communicator offers no LL128 connections: no size picks it. */
    @Test
    void withoutLl128NoSizePicksIt() {
        GpuTuner t = tuner(Map.of(), null, 2);
        for (long bytes = 4; bytes <= (1L << 30); bytes *= 2) {
            assertNotEquals(Protocol.LL128, protocol(t, bytes, 2), bytes + " bytes");
        }
        assertEquals(Protocol.LL, protocol(t, GpuTuner.DEFAULT_LL_THRESHOLD, 2));
        assertEquals(Protocol.SIMPLE, protocol(t, GpuTuner.DEFAULT_LL_THRESHOLD + 4, 2));
        GpuTuner forced = tuner(Map.of("SPARKCCL_PROTO", "LL128"), null, 2);
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> protocol(forced, 1 << 20, 2));
        assertTrue(e.getMessage().contains("NVLink"), e.getMessage());
    }

    @Test
    void settingsOverrideTheModel() {
        GpuTuner t = tuner(Map.of("SPARKCCL_LL_THRESHOLD", "4K", "SPARKCCL_LL128_THRESHOLD", "1M"), LL128, 2);
        assertEquals("sccl_ring_float_ll128", t.plan(Kind.ALL_REDUCE, 100_000, DataType.FLOAT32, 2).kernel);
        assertTrue(t.plan(Kind.ALL_REDUCE, 250_000, DataType.FLOAT32, 2).sliceElems * 4 <= LL128.slotDataBytes());
        assertEquals(Protocol.LL, protocol(t, 4096, 2));
        assertEquals(Protocol.LL128, protocol(t, 4100, 2));
        assertEquals(Protocol.LL128, protocol(t, 1 << 20, 2));
        assertEquals(Protocol.SIMPLE, protocol(t, (1 << 20) + 4, 2));
        GpuTuner forced = tuner(Map.of("SPARKCCL_PROTO", "ll128"), LL128, 2);
        assertEquals(Protocol.LL128, protocol(forced, 8, 2));
        assertEquals(Protocol.LL128, protocol(forced, 1L << 30, 2));
        assertEquals(Protocol.LL128, forced.plan(Kind.ALL_GATHER, 1000, DataType.FLOAT32, 2).protocol);
    }

    @Test
    void ll128SlotsAreWholeLines() {
        GpuLl128Layout l = new GpuLl128Layout(4, 100_000);
        assertEquals(0, l.slotBytes() % GpuLl128Layout.LINE_BYTES);
        assertEquals(l.slotBytes() / 128 * 120, l.slotDataBytes());
        assertEquals(0, l.channelBytes() % 4096);
        assertEquals(4 * l.channelBytes(), l.totalBytes());
        assertThrows(IllegalArgumentException.class, () -> new GpuLl128Layout(4, 1024));
    }
}
