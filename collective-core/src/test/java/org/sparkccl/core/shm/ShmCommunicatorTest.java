package org.sparkccl.core.shm;

import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.memory.HostStagingBuffer;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.warmup.WarmUp;
import org.sparkccl.core.transport.LocalMemoryTransport;

class ShmCommunicatorTest {

    @ParameterizedTest(name = "{0} ranks, {1}, count {2}, channels {3}")
    @CsvSource({
        "1, LL, 7, 1", "2, LL, 1, 1", "2, Simple, 1023, 1", "3, LL, 1023, 1", "3, Simple, 65537, 1",
        "4, Simple, 300001, 2", "5, LL, 65537, 1", "4, auto, 1000003, 3"})
    void allReduceFloatSumMatchesFloat64Reference(int n, String proto, int count, int channels) throws Exception {
        Params params = Params.defaults().withOverrides(Map.of("SPARKCCL_PROTO", proto,
                "SPARKCCL_NCHANNELS", String.valueOf(channels)));
        float[][] inputs = new float[n][count];
        Random random = new Random(42 + n + count);
        for (float[] in : inputs) {
            for (int i = 0; i < count; i++) {
                in[i] = random.nextFloat() * 2 - 1;
            }
        }
        double[] reference = new double[count];
        for (float[] in : inputs) {
            for (int i = 0; i < count; i++) {
                reference[i] += in[i];
            }
        }
        float[][] results = new float[n][];
        ThreadRanks.run(n, params, comm -> {
            float[] data = inputs[comm.rank()].clone();
            comm.allReduce(data, ReduceOp.SUM);
            comm.allReduce(data, ReduceOp.SUM); // twice: steps and flags carry across calls
            results[comm.rank()] = data;
        });
        for (int i = 0; i < count; i++) {
            double want = reference[i] * n;
            assertEquals(want, results[0][i], 1e-5 * n * n + 1e-6 * Math.abs(want), "element " + i);
        }
        for (int r = 1; r < n; r++) {
            for (int i = 0; i < count; i++) {
                assertEquals(Float.floatToRawIntBits(results[0][i]), Float.floatToRawIntBits(results[r][i]),
                        "rank " + r + " differs from rank 0 at element " + i);
            }
        }
        assertEquals(0, LocalMemoryTransport.outstandingBytesInJvm());
        assertTrue(HostStagingBuffer.outstandingBytes() == 0);
    }

    @Test
    void aCommunicatorWhoseRanksAllWarmedUpBeforeSkipsTheWarmUpAndStillWorks() throws Exception {
        Params params = Params.defaults();
        // The first group in this JVM may or may not be the first ShmCommunicator here; after it, every rank is warm.
        ThreadRanks.run(3, params, comm -> comm.allReduce(new float[] {1}, ReduceOp.SUM));
        assertTrue(WarmUp.doneInThisJvm(ShmCommunicator.class));
        boolean[] skipped = new boolean[3];
        float[][] results = new float[3][];
        ThreadRanks.run(3, params, comm -> {
            skipped[comm.rank()] = ((ShmCommunicator) comm).skippedWarmUp();
            float[] data = {comm.rank() + 1};
            comm.allReduce(data, ReduceOp.SUM);
            results[comm.rank()] = data;
        });
        for (int r = 0; r < 3; r++) {
            assertTrue(skipped[r], "rank " + r + " warmed up again");
            assertEquals(6f, results[r][0]);
        }
    }

    @Test
    void waitsSpinLessWhenRanksOutnumberCoresUnlessTheUserSaidOtherwise() {
        int cores = Runtime.getRuntime().availableProcessors();
        int spins = Params.SPINS_BEFORE_YIELD.defaultValue();
        assertEquals(spins, ShmCommunicator.spinsBeforeYield(Params.defaults(), cores));
        assertEquals(ShmCommunicator.OVERSUBSCRIBED_SPINS, ShmCommunicator.spinsBeforeYield(Params.defaults(), cores + 1));
        Params set = Params.defaults().withOverrides(Map.of("SPARKCCL_SPINS_BEFORE_YIELD", "5000"));
        assertEquals(5000, ShmCommunicator.spinsBeforeYield(set, cores + 1));
    }
}
