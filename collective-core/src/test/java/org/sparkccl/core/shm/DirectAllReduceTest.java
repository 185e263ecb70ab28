package org.sparkccl.core.shm;

import org.sparkccl.core.CclException;
import org.sparkccl.core.CclTimeoutException;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.DataType;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.SharedBuffer;
import org.sparkccl.core.memory.HostStagingBuffer;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.agrona.UnsafeApi;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.sparkccl.core.check.ReferenceCheck;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.transport.LocalMemoryTransport;

/**
 * The direct all-reduce on shared buffers ({@link Communicator#allocateShared}), ranks as threads:
 * every type and op, odd counts, in place, out of place and mixed across ranks, each result bit for
 * bit the rank-order fold (so every rank holds the same bits) and within the float64 reference's
 * tolerance; shared and unshared buffers across ranks failing on every rank; nothing left allocated.
 */
class DirectAllReduceTest {
    private static final long[] COUNTS = {1, 7, 1023, 65537};
    private static final long LARGE = 4L * 1024 * 1024 + 3;

    @ParameterizedTest(name = "{0} ranks")
    @ValueSource(ints = {2, 3, 4, 5})
    void everyTypeAndOpIsTheRankOrderFoldOnEveryRank(int n) throws Exception {
        Params params = Params.defaults().withOverrides(Map.of("SPARKCCL_ALGO", "Direct"));
        List<String> wrong = Collections.synchronizedList(new ArrayList<>());
        Map<Integer, Integer> cases = new ConcurrentHashMap<>();
        ThreadRanks.run(n, params, comm -> {
            long maxBytes = 8 * 65537;
            try (SharedBuffer shared = comm.allocateShared(2 * maxBytes + 64);
                 HostStagingBuffer expected = new HostStagingBuffer(maxBytes);
                 HostStagingBuffer scratch = new HostStagingBuffer(maxBytes)) {
                long send = shared.address();
                long recv = shared.address() + maxBytes + 64;
                int done = 0;
                for (DataType type : DataType.values()) {
                    for (ReduceOp op : ReduceOp.values()) {
                        for (long count : COUNTS) {
                            for (String place : new String[] {"out", "in", "mixed"}) {
                                boolean inPlace = place.equals("in") || place.equals("mixed") && comm.rank() % 2 == 1;
                                String key = type + "/" + op + "/" + count + "/" + place;
                                check(comm, key, type, op, count, inPlace ? recv : send, recv, expected.address(),
                                        scratch.address(), wrong);
                                done++;
                            }
                        }
                    }
                }
                cases.put(comm.rank(), done);
            }
            assertEquals(0, ((ShmCommunicator) comm).sharedBytes());
        });
        assertEquals(List.of(), wrong.subList(0, Math.min(10, wrong.size())));
        assertEquals(n, cases.size());
        assertEquals(0, LocalMemoryTransport.outstandingBytesInJvm());
        assertEquals(0, HostStagingBuffer.outstandingBytes());
    }

    /**
     * 4 Mi + 3 elements with auto settings (direct above the threshold), both placements, 2, 3 and 4
     * ranks (from 3 ranks the ranks share 32 KB chunks: 513 chunks per call here, taken in any order).
     */
    @ParameterizedTest(name = "{0} ranks")
    @ValueSource(ints = {2, 3, 4})
    void largeOddCountIsTheRankOrderFold(int n) throws Exception {
        List<String> wrong = Collections.synchronizedList(new ArrayList<>());
        ThreadRanks.run(n, Params.defaults(), comm -> {
            long bytes = 4 * LARGE;
            try (SharedBuffer a = comm.allocateShared(bytes); SharedBuffer b = comm.allocateShared(bytes);
                 HostStagingBuffer expected = new HostStagingBuffer(bytes);
                 HostStagingBuffer scratch = new HostStagingBuffer(bytes)) {
                check(comm, "float/sum/out", DataType.FLOAT32, ReduceOp.SUM, LARGE, a.address(), b.address(),
                        expected.address(), scratch.address(), wrong);
                check(comm, "float/avg/in", DataType.FLOAT32, ReduceOp.AVG, LARGE, b.address(), b.address(),
                        expected.address(), scratch.address(), wrong);
                check(comm, "int32/max/in", DataType.INT32, ReduceOp.MAX, LARGE, a.address(), a.address(),
                        expected.address(), scratch.address(), wrong);
            }
        });
        assertEquals(List.of(), wrong);
        assertEquals(0, LocalMemoryTransport.outstandingBytesInJvm());
    }

    private static void check(Communicator comm, String key, DataType type, ReduceOp op, long count, long src,
                              long recv, long expected, long scratch, List<String> wrong) {
        int n = comm.size();
        ReferenceCheck check = new ReferenceCheck(type, op, n, ReferenceCheck.seed(11, key));
        check.fillInput(comm.rank(), src, 0, count);
        comm.allReduce(src, recv, count, type, op);
        ReferenceCheck.Result result = check.checkReduced(recv, 0, count);
        if (result.wrong() > 0) {
            wrong.add(key + " rank " + comm.rank() + ": " + result);
        }
        check.foldInRankOrder(expected, scratch, count);
        long bytes = count * type.size();
        for (long i = 0; i < bytes; i++) {
            if (UnsafeApi.getByte(recv + i) != UnsafeApi.getByte(expected + i)) {
                wrong.add(key + " rank " + comm.rank() + ": byte " + i + " differs from the rank-order fold");
                break;
            }
        }
    }

    @Test
    void sharedOnSomeRanksOnlyFailsOnEveryRankNamingBothCalls() throws Exception {
        Params params = Params.defaults().withOverrides(Map.of("SPARKCCL_TIMEOUT_MS", "20000"));
        Map<Integer, CclException> errors = new ConcurrentHashMap<>();
        long count = 100_000; // 400 KB: direct where shared, a ring where not
        ThreadRanks.run(3, params, comm -> {
            try (SharedBuffer shared = comm.allocateShared(4 * count);
                 HostStagingBuffer plain = new HostStagingBuffer(4 * count)) {
                comm.allReduce(shared.address(), shared.address(), count, DataType.FLOAT32, ReduceOp.SUM); // agreed
                long buffer = comm.rank() == 1 ? plain.address() : shared.address();
                errors.put(comm.rank(), assertThrows(CclException.class,
                        () -> comm.allReduce(buffer, buffer, count, DataType.FLOAT32, ReduceOp.SUM)));
            }
        });
        assertEquals(3, errors.size());
        boolean named = false;
        for (CclException e : errors.values()) {
            assertFalse(e instanceof CclTimeoutException, e.getMessage());
            named |= e.getMessage().contains("collective mismatch") && e.getMessage().contains("direct on shared buffers");
        }
        assertTrue(named, "some rank reports the mismatch itself: " + errors);
        assertEquals(0, LocalMemoryTransport.outstandingBytesInJvm());
    }

    @Test
    void anAllocationThatFailsOnOneRankFailsOnEvery() throws Exception {
        Map<Integer, RuntimeException> errors = new ConcurrentHashMap<>();
        ThreadRanks.run(3, Params.defaults(), comm -> {
            long bytes = comm.rank() == 2 ? 0 : 4096; // rank 2 asks for nothing: refused
            errors.put(comm.rank(), assertThrows(RuntimeException.class, () -> comm.allocateShared(bytes)));
        });
        assertEquals(3, errors.size());
        for (int r = 0; r < 2; r++) {
            assertTrue(errors.get(r).getMessage().contains("rank 2 asked for 0 bytes"), errors.get(r).getMessage());
        }
        assertEquals(0, LocalMemoryTransport.outstandingBytesInJvm());
    }
}
