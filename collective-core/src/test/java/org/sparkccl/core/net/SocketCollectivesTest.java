package org.sparkccl.core.net;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Map;
import java.util.function.IntFunction;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.DataType;
import org.sparkccl.core.HostStagingBuffer;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.check.ReferenceCheck;
import org.sparkccl.core.transport.LocalMemoryTransport;

/**
 * Every type and op over the socket engines, ranks as threads on pretend hosts: one ring over TCP
 * (one rank per host) and two-level (two hosts of two ranks), against the float64 reference on
 * random data, odd counts included; then the other collectives; nothing left allocated.
 */
class SocketCollectivesTest {
    private static final long SEED = 0x50C3E7L;

    @AfterEach
    void nothingLeaked() {
        assertEquals(0, SocketCommunicator.outstandingBytesInJvm(), "socket FIFOs left");
        assertEquals(0, HostStagingBuffer.outstandingBytes(), "staging left");
        assertEquals(0, LocalMemoryTransport.outstandingBytesInJvm(), "LOCAL regions left");
    }

    @ParameterizedTest(name = "{0} ranks, {1} per host, {2} connection(s)")
    @CsvSource({"3, 1, 2", "4, 2, 3", "2, 1, 1"})
    void everyTypeAndOpMatchesTheReference(int n, int perHost, int connections) throws Exception {
        IntFunction<String> hostOf = r -> "host" + (r / perHost);
        long[] counts = {1, 7, 1001, 262_147};
        SocketRanks.run(n, hostOf, Map.of("SPARKCCL_SOCKET_CONNECTIONS", String.valueOf(connections)), comm -> {
            Class<?> engine = perHost > 1 ? TwoLevelCommunicator.class : SocketCommunicator.class;
            assertEquals(engine, comm.getClass());
            for (DataType type : DataType.values()) {
                for (ReduceOp op : ReduceOp.values()) {
                    for (long count : counts) {
                        if (count > 1001 && type != DataType.FLOAT32 && type != DataType.INT8) {
                            continue; // the long count is about loops and slots, not about the type
                        }
                        allReduceMatches(comm, type, op, count, count % 2 == 0);
                    }
                }
            }
            otherCollectivesMatch(comm, 1001);
        });
    }

    private static void allReduceMatches(Communicator comm, DataType type, ReduceOp op, long count, boolean inPlace) {
        ReferenceCheck check = new ReferenceCheck(type, op, comm.size(), ReferenceCheck.seed(SEED, type, op, count));
        long bytes = count * type.size();
        try (HostStagingBuffer send = new HostStagingBuffer(bytes); HostStagingBuffer recv = new HostStagingBuffer(bytes)) {
            check.fillInput(comm.rank(), send.address(), 0, count);
            long out = inPlace ? send.address() : recv.address();
            comm.allReduce(send.address(), out, count, type, op);
            ReferenceCheck.Result result = check.checkReduced(out, 0, count);
            assertEquals(0, result.wrong(), "rank " + comm.rank() + " " + type + " " + op + " count " + count + ": " + result);
        }
    }

    private static void otherCollectivesMatch(Communicator comm, long count) {
        int n = comm.size();
        DataType type = DataType.FLOAT64;
        long block = count * type.size();
        ReferenceCheck check = new ReferenceCheck(type, ReduceOp.SUM, n, ReferenceCheck.seed(SEED, "others", count));
        try (HostStagingBuffer send = new HostStagingBuffer(block * n); HostStagingBuffer recv = new HostStagingBuffer(block * n)) {
            check.fillInput(comm.rank(), send.address(), 0, count * n);
            comm.reduceScatter(send.address(), recv.address(), count, type, ReduceOp.SUM);
            assertEquals(0, check.checkReduced(recv.address(), comm.rank() * count, count).wrong(), "reduceScatter");

            check.fillInput(comm.rank(), send.address(), 0, count);
            comm.allGather(send.address(), recv.address(), count, type);
            for (int r = 0; r < n; r++) {
                assertEquals(0, check.checkCopy(r, recv.address() + r * block, 0, count).wrong(), "allGather block " + r);
            }

            int root = n - 1;
            check.fillInput(comm.rank(), send.address(), 0, count);
            comm.broadcast(send.address(), recv.address(), count, type, root);
            assertEquals(0, check.checkCopy(root, recv.address(), 0, count).wrong(), "broadcast from " + root);
            comm.barrier();
        }
    }
}
