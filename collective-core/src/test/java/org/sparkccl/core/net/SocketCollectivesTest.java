package org.sparkccl.core.net;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Map;
import java.util.function.IntFunction;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;
import org.sparkccl.core.DataType;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.check.CollectiveCheck;
import org.sparkccl.core.check.ReferenceCheck;
import org.sparkccl.core.memory.HostStagingBuffer;

/**
 * Every type and op over the socket engines, ranks as threads on pretend hosts: one ring over TCP
 * (one rank per host) and two-level (two hosts of two ranks), against the float64 reference on
 * random data, odd counts included; then the other collectives; nothing left allocated.
 */
class SocketCollectivesTest {
    private static final long SEED = 0x50C3E7L;

    @AfterEach
    void nothingLeaked() {
        SocketRanks.assertNothingLeaked();
    }

    @ParameterizedTest(name = "{0} ranks, {1} per host, {2} connection(s), split {3}")
    @CsvSource({"3, 1, 2, -1", "4, 2, 3, -1", "2, 1, 1, -1", "3, 1, 2, 1", "4, 2, 3, 1", "2, 1, 2, 0", "4, 1, 2, -1",
            "5, 1, 2, -1", "6, 1, 2, -1"})
    void everyTypeAndOpMatchesTheReference(int n, int perHost, int connections, int split) throws Exception {
        IntFunction<String> hostOf = r -> "host" + (r / perHost);
        Map<String, String> settings = Map.of("SPARKCCL_SOCKET_CONNECTIONS", String.valueOf(connections),
                "SPARKCCL_SOCKET_SPLIT", String.valueOf(split));
        SocketRanks.run(n, hostOf, settings, comm -> {
            Class<?> engine = perHost > 1 ? TwoLevelCommunicator.class : SocketCommunicator.class;
            assertEquals(engine, comm.getClass());
            assertEquals(perHost > 1 ? "two-level: " + n / perHost + " hosts x " + perHost + " ranks, LOCAL inside, TCP across"
                    : "one TCP ring: " + n + " ranks on " + n + " host(s)", comm.layout());
            CollectiveCheck check = new CollectiveCheck(SEED, System.err).runAll(comm, new long[] {1, 7, 1001}, 1001);
            check.allReduce(comm, DataType.FLOAT32, ReduceOp.SUM, 262_147);
            check.allReduce(comm, DataType.INT8, ReduceOp.MAX, 262_147);
            check.others(comm, DataType.FLOAT64, 65_537);
            assertEquals(0, check.wrong(), "rank " + comm.rank() + ": wrong elements (see stderr)");
        });
    }

    /**
     * The halving-then-doubling path (SOCKET_HALVING_BYTES) with every type and op, at counts that
     * leave some ranks windows of one element or none, powers of two and not (the pairs that fold
     * first), in place and out of place (the caller's input left as it was).
     */
    @ParameterizedTest(name = "{0} ranks")
    @ValueSource(ints = {2, 3, 4, 5, 6, 8})
    void halvingThenDoublingMatchesTheReference(int n) throws Exception {
        // Everything above 1 byte goes by halving: the doubling path keeps only 1-byte calls.
        Map<String, String> settings = Map.of("SPARKCCL_SOCKET_SMALL_BYTES", "1", "SPARKCCL_SOCKET_HALVING_BYTES", "1M");
        SocketRanks.run(n, r -> "host" + r, settings, comm -> {
            CollectiveCheck check = new CollectiveCheck(SEED, System.err).runAll(comm, new long[] {2, 3, 7, 1001, 65_537}, 1001);
            long wrong = check.wrong();
            for (long count : new long[] {5, 100_003, 262_144}) {
                ReferenceCheck ref = new ReferenceCheck(DataType.FLOAT32, ReduceOp.SUM, n,
                        ReferenceCheck.seed(SEED, "out of place", count));
                try (HostStagingBuffer send = new HostStagingBuffer(count * 4);
                     HostStagingBuffer recv = new HostStagingBuffer(count * 4)) {
                    ref.fillInput(comm.rank(), send.address(), 0, count);
                    comm.allReduce(send.address(), recv.address(), count, DataType.FLOAT32, ReduceOp.SUM);
                    wrong += ref.checkReduced(recv.address(), 0, count).wrong();
                    wrong += ref.checkCopy(comm.rank(), send.address(), 0, count).wrong();
                }
            }
            assertEquals(0, wrong, "rank " + comm.rank() + ": wrong elements (see stderr)");
        });
    }
}
