package org.sparkccl.ipc.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.sparkccl.core.DataType;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.check.ReferenceCheck;
import org.sparkccl.core.param.Params;
import org.sparkccl.ipc.cuda.CudaStream;

/**
 * Every stream-ordered test of {@link GpuStreamOrderedTest} again with stream-ordered calls queued through
 * the communicator's one-kernel graph (SPARKCCL_STREAM_LAUNCH=graph, {@code GraphLaunch}): one-shot and
 * ring kernels of every type and op rewritten into the same graph node call after call, back to back,
 * across streams, and beside a CUDA graph capture (which records plain launches); and that the calls
 * did go through the graph.
 */
@Tag("gpu")
class GpuStreamGraphLaunchTest extends GpuStreamOrderedTest {
    @Override
    Params params(String... keyValues) {
        return paramsWith(new String[] {"SPARKCCL_STREAM_LAUNCH", "graph"}, keyValues);
    }

    /** One-shot and ring sizes alternating, each call checked: every one was queued through the graph. */
    @Test
    void everyStreamOrderedCallGoesThroughTheGraph() throws Exception {
        GpuTestSupport.assumeGpus(1);
        List<String> failures = Collections.synchronizedList(new ArrayList<>());
        GpuTestSupport.runRanks(2, GpuTestSupport.gpus(), params(), comm -> {
            long[] counts = {1, 4099, (1L << 20) + 3, 7};
            try (CudaStream user = new CudaStream(comm.device(), "test stream")) {
                for (int i = 0; i < counts.length; i++) {
                    record(failures, streamOrderedAllReduce(comm, user, DataType.FLOAT32, ReduceOp.SUM, counts[i],
                            (i & 1) == 0, ReferenceCheck.seed(31, i), 0));
                }
            }
            assertEquals(counts.length, comm.graphLaunches(), "rank " + comm.rank() + ": stream-ordered calls queued through the graph");
        });
        assertNoFailures(failures);
    }
}
