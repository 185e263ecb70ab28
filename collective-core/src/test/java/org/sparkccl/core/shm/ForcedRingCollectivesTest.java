package org.sparkccl.core.shm;

import org.sparkccl.core.Communicator;
import org.sparkccl.core.DataType;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.bootstrap.ThreadGroupBootstrap;
import org.sparkccl.core.memory.HostStagingBuffer;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.sparkccl.core.check.ReferenceCheck;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.transport.LocalMemoryTransport;

/**
 * The host engine on rings that are not in rank order (forced with SPARKCCL_RINGS, a different ring on
 * each of two channels): every type and op of all-reduce, reduce-scatter, all-gather and broadcast
 * from every root match the float64 (or exact) reference, and outputs are placed by rank, not by ring
 * position. Ranks as threads; MultiProcessForcedRingsTest (ipc) runs the same rings as processes.
 */
class ForcedRingCollectivesTest {
    private static final int RANKS = 4;
    private static final String RINGS = "2 0 3 1|1 3 0 2";
    /** Every type and op at these counts (one channel)... */
    private static final long[] COUNTS = {1, 1023};
    /** ...and a few at a count that spreads over both channels (and both rings). */
    private static final long LARGE = 300_001;
    private static final long SEED = 17;

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"LL", "Simple"})
    void everyCollectiveMatchesTheReferenceOnForcedRings(String proto) throws Exception {
        Params params = Params.defaults().withOverrides(Map.of("SPARKCCL_RINGS", RINGS, "SPARKCCL_NCHANNELS", "2",
                "SPARKCCL_PROTO", proto, "SPARKCCL_ALGO", "Ring"));
        List<String> failures = Collections.synchronizedList(new ArrayList<>());
        ThreadRanks.run(RANKS, params, comm -> {
            ShmCommunicator host = (ShmCommunicator) comm;
            assertEquals("2 -> 0 -> 3 -> 1 -> 2", host.ring(0).toString());
            assertEquals("1 -> 3 -> 0 -> 2 -> 1", host.ring(1).toString());
            long maxBytes = LARGE * RANKS * 8;
            try (HostStagingBuffer send = new HostStagingBuffer(maxBytes);
                 HostStagingBuffer recv = new HostStagingBuffer(maxBytes)) {
                for (DataType type : DataType.values()) {
                    for (ReduceOp op : ReduceOp.values()) {
                        for (long count : COUNTS) {
                            allReduce(comm, type, op, count, send.address(), recv.address(), failures);
                        }
                        reduceScatter(comm, type, op, COUNTS[1], send.address(), recv.address(), failures);
                    }
                    allGather(comm, type, COUNTS[1], send.address(), recv.address(), failures);
                    for (int root = 0; root < RANKS; root++) {
                        broadcast(comm, type, COUNTS[1], root, send.address(), recv.address(), failures);
                    }
                }
                allReduce(comm, DataType.FLOAT32, ReduceOp.SUM, LARGE, send.address(), recv.address(), failures);
                allReduce(comm, DataType.BFLOAT16, ReduceOp.AVG, LARGE, send.address(), recv.address(), failures);
                allReduce(comm, DataType.INT8, ReduceOp.PROD, LARGE, send.address(), recv.address(), failures);
                reduceScatter(comm, DataType.FLOAT32, ReduceOp.SUM, LARGE, send.address(), recv.address(), failures);
                allGather(comm, DataType.FLOAT64, LARGE, send.address(), recv.address(), failures);
                broadcast(comm, DataType.INT32, LARGE, 3, send.address(), recv.address(), failures);
                comm.barrier();
            }
        });
        assertEquals(List.of(), failures);
        assertEquals(0, LocalMemoryTransport.outstandingBytesInJvm());
        assertEquals(0, HostStagingBuffer.outstandingBytes());
    }

    private static void allReduce(Communicator comm, DataType type, ReduceOp op, long count, long send, long recv,
                                  List<String> failures) {
        ReferenceCheck check = new ReferenceCheck(type, op, RANKS, ReferenceCheck.seed(SEED, "ar", type, op, count));
        check.fillInput(comm.rank(), send, 0, count);
        comm.allReduce(send, recv, count, type, op);
        record(failures, comm, "allreduce " + type + " " + op + " " + count, check.checkReduced(recv, 0, count));
    }

    private static void reduceScatter(Communicator comm, DataType type, ReduceOp op, long count, long send, long recv,
                                      List<String> failures) {
        ReferenceCheck check = new ReferenceCheck(type, op, RANKS, ReferenceCheck.seed(SEED, "rs", type, op, count));
        check.fillInput(comm.rank(), send, 0, RANKS * count);
        comm.reduceScatter(send, recv, count, type, op);
        record(failures, comm, "reducescatter " + type + " " + op + " " + count,
                check.checkReduced(recv, comm.rank() * count, count));
    }

    private static void allGather(Communicator comm, DataType type, long count, long send, long recv, List<String> failures) {
        ReferenceCheck check = new ReferenceCheck(type, ReduceOp.SUM, RANKS, ReferenceCheck.seed(SEED, "ag", type, count));
        check.fillInput(comm.rank(), send, 0, count);
        comm.allGather(send, recv, count, type);
        for (int r = 0; r < RANKS; r++) {
            record(failures, comm, "allgather " + type + " " + count + " block of rank " + r,
                    check.checkCopy(r, recv + r * count * type.size(), 0, count));
        }
    }

    private static void broadcast(Communicator comm, DataType type, long count, int root, long send, long recv,
                                  List<String> failures) {
        ReferenceCheck check = new ReferenceCheck(type, ReduceOp.SUM, RANKS, ReferenceCheck.seed(SEED, "bc", type, count));
        check.fillInput(comm.rank(), send, 0, count);
        check.fillInput((comm.rank() + 1) % RANKS, recv, 0, count); // not the answer, so that a skipped write shows
        comm.broadcast(send, recv, count, type, root);
        record(failures, comm, "broadcast " + type + " " + count + " root " + root, check.checkCopy(root, recv, 0, count));
    }

    private static void record(List<String> failures, Communicator comm, String what, ReferenceCheck.Result result) {
        if (result.wrong() > 0) {
            failures.add("rank " + comm.rank() + ", " + what + ": " + result);
        }
    }

    @Test
    void ranksWithDifferentRingSettingsFailAtInitInsteadOfHanging() {
        Exception e = assertThrows(Exception.class, () -> new ThreadGroupBootstrap.Group(2, java.time.Duration.ofSeconds(30))
                .run(bootstrap -> {
                    Params params = Params.defaults().withOverrides(Map.of("SPARKCCL_RINGS", bootstrap.rank() == 0 ? "0 1" : "1 0"));
                    ShmCommunicator.create(bootstrap, List.of(new LocalMemoryTransport()), params).close();
                    return null;
                }, java.time.Duration.ofSeconds(60)));
        String message = String.valueOf(rootCause(e).getMessage());
        assertTrue(message.contains("SPARKCCL_RINGS='0 1'") && message.contains("SPARKCCL_RINGS='1 0'")
                && message.contains("set SPARKCCL_RINGS and SPARKCCL_AVOID_SLOW_LINKS alike on every rank"), message);
        assertEquals(0, LocalMemoryTransport.outstandingBytesInJvm());
    }

    private static Throwable rootCause(Throwable t) {
        while (t.getCause() != null && t.getCause() != t) {
            t = t.getCause();
        }
        return t;
    }
}
