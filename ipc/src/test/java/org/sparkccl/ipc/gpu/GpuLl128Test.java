package org.sparkccl.ipc.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.sparkccl.core.CclException;
import org.sparkccl.core.DataType;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.check.ReferenceCheck;
import org.sparkccl.core.param.Params;
import org.sparkccl.ipc.cuda.DeviceBuffer;

/**
 * The LL128 ring, forced (SPARKCCL_PROTO=LL128, ALGO=Ring), with ranks as threads of this JVM: on one
 * GPU the ranks share it (a hop within one GPU), on two NVLinked GPUs the hops cross NVLink. Random
 * inputs against float64 / exact references.
 */
@Tag("gpu")
class GpuLl128Test {
    /** Odd counts: partial 128-byte lines, partial 16-byte lane parts, and steps that end mid-line. */
    private static final long[] COUNTS = {1, 3, 1009, 65537, (1L << 20) + 7};

    private static Params ll128() {
        return GpuTestSupport.params("SPARKCCL_PROTO", "LL128", "SPARKCCL_ALGO", "Ring");
    }

    @Test
    void everyTypeOpAndPlacementOnTwoRanks() throws Exception {
        GpuTestSupport.assumeGpus(1);
        List<String> failures = Collections.synchronizedList(new ArrayList<>());
        GpuTestSupport.runRanks(2, GpuTestSupport.gpus(), ll128(), comm -> {
            if (comm.rank() == 0) {
                System.out.println("LL128: " + comm.describeLinks());
            }
            assertEquals("LL128", comm.algorithmFor(65537, DataType.FLOAT32));
            for (DataType type : DataType.values()) {
                for (ReduceOp op : ReduceOp.values()) {
                    for (long count : COUNTS) {
                        for (boolean inPlace : new boolean[] {false, true}) {
                            record(failures, GpuTestSupport.allReduceAndCheck(comm, type, op, count, inPlace,
                                    ReferenceCheck.seed(21, type, op, count, inPlace)));
                        }
                    }
                }
            }
            GpuCollectivesTest.otherCollectives(comm, failures);
        });
        assertTrue(failures.isEmpty(), failures.size() + " wrong results:\n" + String.join("\n", failures));
    }

    @Test
    void fourRanks() throws Exception {
        GpuTestSupport.assumeGpus(1);
        List<String> failures = Collections.synchronizedList(new ArrayList<>());
        GpuTestSupport.runRanks(4, GpuTestSupport.gpus(), ll128(), comm -> {
            for (long count : COUNTS) {
                record(failures, GpuTestSupport.allReduceAndCheck(comm, DataType.FLOAT32, ReduceOp.SUM, count, false,
                        ReferenceCheck.seed(22, count)));
                record(failures, GpuTestSupport.allReduceAndCheck(comm, DataType.BFLOAT16, ReduceOp.AVG, count, true,
                        ReferenceCheck.seed(23, count)));
                record(failures, GpuTestSupport.allReduceAndCheck(comm, DataType.INT8, ReduceOp.MAX, count, false,
                        ReferenceCheck.seed(24, count)));
                record(failures, GpuTestSupport.allReduceAndCheck(comm, DataType.FLOAT64, ReduceOp.PROD, count, true,
                        ReferenceCheck.seed(25, count)));
            }
            GpuCollectivesTest.otherCollectives(comm, failures);
        });
        assertTrue(failures.isEmpty(), failures.size() + " wrong results:\n" + String.join("\n", failures));
    }

    /** The header still goes around first: ranks that disagree about the count fail, every one of them. */
    @Test
    void aCountMismatchFailsEveryRank() throws Exception {
        GpuTestSupport.assumeGpus(1);
        List<String> errors = Collections.synchronizedList(new ArrayList<>());
        GpuTestSupport.runRanks(2, GpuTestSupport.gpus(), ll128(), comm -> {
            DeviceBuffer b = GpuTestSupport.Buffers.of().a;
            long count = comm.rank() == 0 ? 70001 : 70002;
            CclException e = assertThrows(CclException.class,
                    () -> comm.allReduce(b.address(), b.address(), count, DataType.FLOAT32, ReduceOp.SUM));
            errors.add(e.getMessage());
            assertThrows(CclException.class, comm::barrier, "a failed communicator stays failed");
        });
        assertEquals(2, errors.size(), "every rank fails: " + errors);
        String all = String.join(" | ", errors);
        assertTrue(all.contains("count 70001") && all.contains("count 70002") && all.contains("LL128"), all);
    }

    /** Staged (P2P off) hops cannot run LL128: forcing it fails on every rank, naming the hop. */
    @Test
    void forcedLl128FailsWhereAHopIsStaged() throws Exception {
        GpuTestSupport.assumeGpus(1);
        Params params = GpuTestSupport.params("SPARKCCL_PROTO", "LL128", "SPARKCCL_P2P_DISABLE", "1");
        Exception e = assertThrows(Exception.class,
                () -> GpuTestSupport.runRanks(2, GpuTestSupport.gpus(), params, comm -> { }));
        StringBuilder messages = new StringBuilder();
        for (Throwable t = e; t != null; t = t.getCause()) {
            messages.append(t.getMessage()).append(" | ");
        }
        assertTrue(messages.toString().contains("through host memory"), messages.toString());
        GpuTestSupport.assertNothingLeaked();
    }

    private static void record(List<String> failures, String failure) {
        if (failure != null) {
            System.out.println("WRONG: " + failure);
            failures.add(failure);
        }
    }
}
