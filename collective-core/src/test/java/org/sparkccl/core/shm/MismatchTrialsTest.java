package org.sparkccl.core.shm;

import org.sparkccl.core.CclException;
import org.sparkccl.core.DataType;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.memory.HostStagingBuffer;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import java.util.Random;
import java.util.concurrent.ConcurrentHashMap;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.transport.LocalMemoryTransport;

/**
 * Random trials of one rank calling differently from the others (count, type, op or root), at
 * random sizes and algorithms: every rank fails within 1 s with a message, never hangs, and the
 * communicators release everything. CI runs 10 trials; {@code -Psoak} runs 100.
 */
class MismatchTrialsTest {
    /** The bound for every rank to notice a mismatch. */
    private static final long BOUND_MS = 1_000;
    private static final String[] VARIANTS = {"count", "type", "op", "root"};
    private static final String[] ALGOS = {"auto", "Ring", "OneShot"};
    private static final String[] PROTOS = {"auto", "LL", "Simple"};

    @Test
    void everyRankFailsWithinOneSecond() throws Exception {
        trials(10);
    }

    @Test
    @Tag("soak")
    void everyRankFailsWithinOneSecondSoak() throws Exception {
        trials(100);
    }

    private static void trials(int trials) throws Exception {
        Random random = new Random(System.nanoTime());
        long worst = 0;
        for (int t = 0; t < trials; t++) {
            String variant = VARIANTS[t % VARIANTS.length];
            int n = 2 + random.nextInt(3);
            int odd = random.nextInt(n);
            long count = 1 + random.nextInt(random.nextBoolean() ? 1000 : 300_000);
            String algo = ALGOS[random.nextInt(ALGOS.length)];
            String proto = PROTOS[random.nextInt(PROTOS.length)];
            Params params = Params.defaults().withOverrides(Map.of("SPARKCCL_ALGO", algo, "SPARKCCL_PROTO", proto));
            String what = variant + " differs on rank " + odd + " of " + n + ", count " + count + ", algo " + algo
                    + ", proto " + proto;
            worst = Math.max(worst, trial(n, odd, variant, count, params, what));
        }
        System.out.println(trials + " mismatch trials: every rank failed, the slowest after " + worst + " ms");
    }

    /** Returns the slowest rank's time from its call to its error, in ms. */
    private static long trial(int n, int odd, String variant, long count, Params params, String what) throws Exception {
        Map<Integer, Long> millis = new ConcurrentHashMap<>();
        Map<Integer, String> errors = new ConcurrentHashMap<>();
        ThreadRanks.run(n, params, comm -> {
            boolean me = comm.rank() == odd;
            try (HostStagingBuffer buffer = new HostStagingBuffer(8 * (count + 1))) {
                long address = buffer.address();
                comm.allReduce(address, address, count, DataType.FLOAT32, ReduceOp.SUM); // agreed: works
                long start = System.nanoTime();
                try {
                    switch (variant) {
                        case "count":
                            comm.allReduce(address, address, me ? count + 1 : count, DataType.FLOAT32, ReduceOp.SUM);
                            break;
                        case "type":
                            comm.allReduce(address, address, count, me ? DataType.INT32 : DataType.FLOAT32, ReduceOp.SUM);
                            break;
                        case "op":
                            comm.allReduce(address, address, count, DataType.FLOAT32, me ? ReduceOp.MAX : ReduceOp.SUM);
                            break;
                        default:
                            comm.broadcast(address, address, count, DataType.FLOAT32, me ? (odd + 1) % n : odd);
                            break;
                    }
                    errors.put(comm.rank(), "NO ERROR");
                } catch (CclException e) {
                    errors.put(comm.rank(), String.valueOf(e.getMessage()));
                }
                millis.put(comm.rank(), (System.nanoTime() - start) / 1_000_000);
            }
        });
        assertEquals(n, errors.size(), what);
        boolean someoneNamesBoth = false;
        for (int r = 0; r < n; r++) {
            String message = errors.get(r);
            assertTrue(message.startsWith("rank "), what + ": rank " + r + ": " + message);
            assertTrue(millis.get(r) < BOUND_MS, what + ": rank " + r + " took " + millis.get(r) + " ms: " + message);
            someoneNamesBoth |= message.contains("collective mismatch");
        }
        assertTrue(someoneNamesBoth, what + ": no rank names both calls: " + errors);
        assertEquals(0, LocalMemoryTransport.outstandingBytesInJvm(), what);
        return millis.values().stream().mapToLong(Long::longValue).max().orElse(0);
    }
}
