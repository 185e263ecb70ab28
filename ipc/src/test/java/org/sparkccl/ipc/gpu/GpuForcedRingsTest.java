package org.sparkccl.ipc.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.sparkccl.core.DataType;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.check.ReferenceCheck;
import org.sparkccl.core.param.Params;

/**
 * The GPU engine on rings out of rank order: 4 ranks as threads on one GPU, SPARKCCL_RINGS giving a
 * different ring to alternate channels. Every type and op of all-reduce, and reduce-scatter, all-gather
 * (outputs placed by rank, not ring position) and broadcast from every root, against the references,
 * over P2P (same-process pointers) and host staging.
 */
@Tag("gpu")
class GpuForcedRingsTest {
    private static final long[] COUNTS = {1, 7, 1023, 65537};
    private static final long BIG = 4L * 1024 * 1024 + 3;

    @ParameterizedTest(name = "{0}, P2P_DISABLE={1}")
    @CsvSource({"LL, 0", "Simple, 0", "LL, 1", "Simple, 1"})
    void fourRanksOnOneGpuOnForcedRings(String proto, String p2pDisable) throws Exception {
        GpuTestSupport.assumeGpus(1);
        Params params = GpuTestSupport.params("SPARKCCL_RINGS", "2 0 3 1|1 3 0 2", "SPARKCCL_NCHANNELS", "4",
                "SPARKCCL_PROTO", proto, "SPARKCCL_ALGO", "Ring", "SPARKCCL_P2P_DISABLE", p2pDisable);
        List<String> failures = Collections.synchronizedList(new ArrayList<>());
        GpuTestSupport.runRanks(4, 1, params, comm -> {
            assertEquals("2 -> 0 -> 3 -> 1 -> 2", comm.ring(0).toString());
            assertEquals("1 -> 3 -> 0 -> 2 -> 1", comm.ring(1).toString());
            assertEquals("2 -> 0 -> 3 -> 1 -> 2", comm.ring(2).toString());
            if (comm.rank() == 0) {
                System.out.println(proto + " P2P_DISABLE=" + p2pDisable + ": " + comm.describeLinks());
            }
            int k = 0;
            for (DataType type : DataType.values()) {
                for (ReduceOp op : ReduceOp.values()) {
                    for (long count : COUNTS) {
                        GpuCollectivesTest.record(failures, GpuTestSupport.allReduceAndCheck(comm, type, op, count,
                                (k++ & 1) == 0, ReferenceCheck.seed(31, type, op, count, proto)));
                    }
                }
            }
            GpuCollectivesTest.record(failures, GpuTestSupport.allReduceAndCheck(comm, DataType.FLOAT32, ReduceOp.SUM,
                    BIG, false, 32));
            GpuCollectivesTest.record(failures, GpuTestSupport.allReduceAndCheck(comm, DataType.BFLOAT16, ReduceOp.AVG,
                    BIG, true, 33));
            GpuCollectivesTest.otherCollectives(comm, failures);
        });
        assertTrue(failures.isEmpty(), failures.size() + " wrong results:\n" + String.join("\n", failures));
    }

    /** Without SPARKCCL_RINGS: the searched rings, the same on every rank, carry the collectives. */
    @Test
    void searchedRingsAgreeOnEveryRank() throws Exception {
        GpuTestSupport.assumeGpus(1);
        int gpus = GpuTestSupport.gpus();
        List<String> failures = Collections.synchronizedList(new ArrayList<>());
        String[][] seen = new String[4][];
        GpuTestSupport.runRanks(4, gpus, GpuTestSupport.params("SPARKCCL_NCHANNELS", "4", "SPARKCCL_DEBUG", "INFO",
                "SPARKCCL_DEBUG_SUBSYS", "GRAPH"), comm -> {
            seen[comm.rank()] = new String[] {comm.ring(0).toString(), comm.ring(1).toString()};
            GpuCollectivesTest.record(failures, GpuTestSupport.allReduceAndCheck(comm, DataType.FLOAT32, ReduceOp.SUM,
                    BIG, false, 34));
            GpuCollectivesTest.otherCollectives(comm, failures);
        });
        for (int r = 1; r < 4; r++) {
            assertEquals(List.of(seen[0]), List.of(seen[r]), "rank " + r + "'s rings");
        }
        assertTrue(failures.isEmpty(), failures.toString());
    }
}
