package org.sparkccl.ipc.gpu;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.sparkccl.core.DataType;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.param.Params;
import org.sparkccl.ipc.cuda.CudaStream;
import org.sparkccl.ipc.cuda.DeviceBuffer;

/**
 * Every stream-ordered test of {@link GpuStreamOrderedTest} again with the stream-resident kernel taking
 * the small one-shot calls (SPARKCCL_STREAM_RESIDENT=1; its auto setting leaves it off where two ranks
 * share a GPU, as they do on a machine with one), and what is its own: calls between its idle ends,
 * on two streams, with launched ring calls between them.
 */
@Tag("gpu")
class GpuStreamResidentTest extends GpuStreamOrderedTest {
    @Override
    Params params(String... keyValues) {
        return paramsWith(new String[] {"SPARKCCL_RESIDENT", "1", "SPARKCCL_STREAM_RESIDENT", "1"}, keyValues);
    }

    /**
     * 160 in-place float64 sums over two regions (one-shot, and a ring every fifth call), alternating
     * between two streams, with pauses longer than the kernel's idle time: the kernel ends and comes back,
     * and every call runs in order on the previous one's output (each doubles it: exact only if so).
     */
    @Test
    void callsAcrossIdleEndsAndStreams() throws Exception {
        GpuTestSupport.assumeGpus(1);
        List<String> failures = Collections.synchronizedList(new ArrayList<>());
        GpuTestSupport.runRanks(2, GpuTestSupport.gpus(), params(), comm -> {
            DeviceBuffer buf = GpuTestSupport.Buffers.of().a;
            long small = 1000;
            long large = (1L << 18) + 5;
            double[] want = {1, 1};
            try (CudaStream s0 = new CudaStream(comm.device(), "test stream 0");
                    CudaStream s1 = new CudaStream(comm.device(), "test stream 1")) {
                fillOnes(buf, small + large, s0);
                comm.synchronize(s0);
                for (int i = 0; i < 160; i++) {
                    CudaStream on = (i & 1) == 0 ? s0 : s1;
                    boolean ring = i % 5 == 4;
                    long at = buf.address() + (ring ? 8 * small : 0);
                    comm.allReduce(at, at, ring ? large : small, DataType.FLOAT64, ReduceOp.SUM, on);
                    want[ring ? 1 : 0] *= 2;
                    if (i % 40 == 39) {
                        comm.synchronize(on);
                        Thread.sleep(10); // longer than the kernel's idle time: it ends, and the next call brings it back
                    }
                }
                comm.synchronize(s1);
                comm.synchronize(s0);
                failures.addAll(checkAll(comm, buf, small, want[0], 0, s0));
                failures.addAll(checkAll(comm, buf, large, want[1], 8 * small, s0));
            }
            assertTrue(comm.streamResidentLaunches() > 1, "rank " + comm.rank()
                    + ": the stream-resident kernel should have taken the calls, ended and restarted: "
                    + comm.streamResidentLaunches() + " launch(es)");
        });
        assertTrue(failures.isEmpty(), failures.toString());
    }

    private static void fillOnes(DeviceBuffer buf, long count, CudaStream on) {
        double[] ones = new double[(int) count];
        Arrays.fill(ones, 1.0);
        buf.copyFromArray(ones, 8 * count, on);
    }

    /** The wrong elements of {@code count} doubles at {@code offset}, each of which should be {@code want}. */
    private static List<String> checkAll(GpuCommunicator comm, DeviceBuffer buf, long count, double want, long offset,
            CudaStream on) {
        double[] got = new double[(int) count];
        DeviceBuffer.copyDeviceToArray(got, buf.address() + offset, 8 * count, on, "rank " + comm.rank());
        List<String> wrong = new ArrayList<>();
        for (int i = 0; i < got.length && wrong.size() < 5; i++) {
            if (got[i] != want) {
                wrong.add("rank " + comm.rank() + " element " + i + " at byte " + offset + ": " + got[i] + " instead of "
                        + want);
            }
        }
        return wrong;
    }
}
