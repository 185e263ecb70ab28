package org.sparkccl.core.shm;

import org.sparkccl.core.CclException;
import org.sparkccl.core.CclTimeoutException;
import org.sparkccl.core.DataType;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.StagingBuffer;
import org.sparkccl.core.memory.HostStagingBuffer;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.sparkccl.core.check.ReferenceCheck;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.transport.LocalMemoryTransport;

/**
 * The one-shot all-reduce (small messages) against the float64 reference, next to the ring it hands
 * over to at the threshold: every type and op, counts on both sides of the threshold, in and out of
 * place, results bit for bit the same on every rank, slots reused over thousands of calls, and
 * ranks that disagree across the threshold failing instead of hanging.
 */
class OneShotAllReduceTest {
    private static final int THRESHOLD = 1024;

    @ParameterizedTest(name = "{0} ranks")
    @ValueSource(ints = {2, 3, 4})
    void everyTypeAndOpAroundTheThresholdMatchesTheReferenceOnEveryRankAlike(int n) throws Exception {
        Params params = Params.defaults().withOverrides(Map.of("SPARKCCL_ONESHOT_THRESHOLD", String.valueOf(THRESHOLD)));
        Map<String, byte[][]> results = new ConcurrentHashMap<>();
        Map<String, String> wrong = new ConcurrentHashMap<>();
        ThreadRanks.run(n, params, comm -> {
            long capacity = 2L * THRESHOLD + 64;
            try (StagingBuffer send = comm.allocateStaging(capacity); StagingBuffer recv = comm.allocateStaging(capacity)) {
                for (DataType type : DataType.values()) {
                    for (ReduceOp op : ReduceOp.values()) {
                        int atThreshold = THRESHOLD / type.size();
                        for (long count : new long[] {1, 7, atThreshold - 1, atThreshold, atThreshold + 1}) {
                            for (boolean inPlace : new boolean[] {false, true}) {
                                String key = type + "/" + op + "/" + count + (inPlace ? "/in" : "/out");
                                ReferenceCheck check = new ReferenceCheck(type, op, n, ReferenceCheck.seed(7, key));
                                long src = inPlace ? recv.address() : send.address();
                                check.fillInput(comm.rank(), src, 0, count);
                                comm.allReduce(src, recv.address(), count, type, op);
                                ReferenceCheck.Result result = check.checkReduced(recv.address(), 0, count);
                                if (result.wrong() > 0) {
                                    wrong.put(key + " rank " + comm.rank(), result.toString());
                                }
                                byte[] bytes = new byte[(int) (count * type.size())];
                                recv.copyOut(bytes, bytes.length);
                                results.computeIfAbsent(key, k -> new byte[n][])[comm.rank()] = bytes;
                            }
                        }
                    }
                }
            }
        });
        assertEquals(Map.of(), wrong);
        assertEquals(DataType.values().length * ReduceOp.values().length * 5 * 2, results.size());
        for (Map.Entry<String, byte[][]> e : results.entrySet()) {
            for (int r = 1; r < n; r++) {
                assertArrayEquals(e.getValue()[0], e.getValue()[r], "rank " + r + " differs from rank 0 in " + e.getKey());
            }
        }
        assertEquals(0, LocalMemoryTransport.outstandingBytesInJvm());
        assertEquals(0, HostStagingBuffer.outstandingBytes());
    }

    /**
     * Slot reuse: thousands of calls that alternate one-shot and ring all-reduces with broadcasts
     * (which do not make every rank wait for every other), on exact integers checked every call.
     */
    @Test
    void thousandsOfCallsAlternatingAcrossTheThresholdStayExact() throws Exception {
        int n = 3;
        int calls = 3000;
        Params params = Params.defaults().withOverrides(Map.of("SPARKCCL_ONESHOT_THRESHOLD", "256"));
        List<String> failures = java.util.Collections.synchronizedList(new ArrayList<>());
        ThreadRanks.run(n, params, comm -> {
            int rank = comm.rank();
            for (int call = 0; call < calls; call++) {
                int kind = call % 4;
                int count = kind == 0 ? 64 : kind == 1 ? 65 : kind == 2 ? 5 : 1; // 64 ints = 256 B: one-shot; 65: ring
                int[] data = new int[count];
                for (int i = 0; i < count; i++) {
                    data[i] = value(rank, call, i);
                }
                if (kind == 2) {
                    int root = call % n;
                    comm.broadcastArray(data, count, DataType.INT32, root);
                    for (int i = 0; i < count; i++) {
                        if (data[i] != value(root, call, i)) {
                            failures.add("call " + call + " broadcast rank " + rank + " element " + i);
                        }
                    }
                    continue;
                }
                comm.allReduce(data, ReduceOp.SUM);
                for (int i = 0; i < count; i++) {
                    int want = 0;
                    for (int r = 0; r < n; r++) {
                        want += value(r, call, i);
                    }
                    if (data[i] != want) {
                        failures.add("call " + call + " (count " + count + ") rank " + rank + " element " + i + ": "
                                + data[i] + " instead of " + want);
                        break;
                    }
                }
            }
        });
        assertEquals(List.of(), failures.subList(0, Math.min(10, failures.size())));
        assertEquals(0, LocalMemoryTransport.outstandingBytesInJvm());
    }

    private static int value(int rank, int call, int i) {
        return rank * 1_000_003 + call * 7919 + i * 31;
    }

    @Test
    void ranksOnEitherSideOfTheThresholdAllFailNamingBothCalls() throws Exception {
        Params params = Params.defaults().withOverrides(Map.of("SPARKCCL_TIMEOUT_MS", "20000",
                "SPARKCCL_ONESHOT_THRESHOLD", String.valueOf(THRESHOLD)));
        Map<Integer, CclException> errors = new ConcurrentHashMap<>();
        ThreadRanks.run(3, params, comm -> {
            comm.allReduce(new float[10], ReduceOp.SUM); // agreed: works
            float[] data = new float[comm.rank() == 1 ? 1000 : 100]; // 4000 bytes: ring; 400: one-shot
            errors.put(comm.rank(), assertThrows(CclException.class, () -> comm.allReduce(data, ReduceOp.SUM)));
        });
        assertEquals(3, errors.size());
        boolean named = false;
        for (CclException e : errors.values()) {
            assertFalse(e instanceof CclTimeoutException, e.getMessage());
            assertTrue(e.getMessage().contains("count 1000") && e.getMessage().contains("count 100,"), e.getMessage());
            named |= e.getMessage().contains("collective mismatch");
        }
        assertTrue(named, "some rank reports the mismatch itself: " + errors);
        assertEquals(0, LocalMemoryTransport.outstandingBytesInJvm());
    }
}
