package org.sparkccl.core.shm;

import org.sparkccl.core.DataType;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.SharedBuffer;
import org.sparkccl.core.memory.HostStagingBuffer;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.sparkccl.core.check.ReferenceCheck;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.transport.LocalMemoryTransport;

/**
 * Calls at the edges of the API: zero elements, addresses not aligned to the element size, a shared
 * buffer closed while a collective uses it, and more than 2^31 elements. Each works, or fails with a
 * clear error; none crashes the JVM or leaves the ranks out of step.
 */
class EdgeCallsTest {

    @Test
    void zeroLengthCallsOfEveryKindWorkAndKeepTheRanksInStep() throws Exception {
        List<String> wrong = Collections.synchronizedList(new ArrayList<>());
        ThreadRanks.run(3, Params.defaults(), comm -> {
            try (HostStagingBuffer buffer = new HostStagingBuffer(8 * 3 * 1000)) {
                long a = buffer.address();
                for (DataType type : DataType.values()) {
                    comm.allReduce(a, a, 0, type, ReduceOp.SUM);
                    comm.reduceScatter(a, a, 0, type, ReduceOp.MAX);
                    comm.allGather(a, a, 0, type);
                    comm.broadcast(a, a, 0, type, 2);
                }
                // The next real call still lines up on every rank and is right.
                ReferenceCheck check = new ReferenceCheck(DataType.FLOAT64, ReduceOp.SUM, 3, 11);
                check.fillInput(comm.rank(), a, 0, 1000);
                comm.allReduce(a, a, 1000, DataType.FLOAT64, ReduceOp.SUM);
                ReferenceCheck.Result result = check.checkReduced(a, 0, 1000);
                if (result.wrong() != 0) {
                    wrong.add("rank " + comm.rank() + ": " + result);
                }
            }
        });
        assertEquals(List.of(), wrong);
    }

    /** Addresses 1..7 bytes past alignment, every floating width, ring (both protocols) and one-shot. */
    @ParameterizedTest(name = "algo {0}")
    @ValueSource(strings = {"Ring", "OneShot", "auto"})
    void misalignedAddressesGiveTheReferenceResult(String algo) throws Exception {
        List<String> wrong = Collections.synchronizedList(new ArrayList<>());
        Params params = Params.defaults().withOverrides(Map.of("SPARKCCL_ALGO", algo));
        ThreadRanks.run(3, params, comm -> {
            try (HostStagingBuffer buffer = new HostStagingBuffer(8 * 20_000 + 64)) {
                for (int skew = 1; skew < 8; skew += 2) {
                    for (DataType type : new DataType[] {DataType.FLOAT32, DataType.FLOAT64, DataType.FLOAT16}) {
                        for (long count : new long[] {7, 1001, 20_000}) {
                            long address = buffer.address() + skew;
                            ReferenceCheck check = new ReferenceCheck(type, ReduceOp.SUM, 3, skew * 31 + count);
                            check.fillInput(comm.rank(), address, 0, count);
                            comm.allReduce(address, address, count, type, ReduceOp.SUM);
                            ReferenceCheck.Result result = check.checkReduced(address, 0, count);
                            if (result.wrong() != 0) {
                                wrong.add("rank " + comm.rank() + " skew " + skew + ": " + result);
                            }
                        }
                    }
                }
            }
        });
        assertEquals(List.of(), wrong);
    }

    /**
     * Rank 0 closes its shared buffer from another thread while a direct all-reduce on it waits for
     * rank 1: the close is refused with a message naming the call, the call completes with the right
     * result, and the buffer closes normally afterwards.
     */
    @Test
    void aSharedBufferClosedWhileADirectAllReduceUsesItIsRefusedClearly() throws Exception {
        long count = 100_003;
        List<String> outcomes = Collections.synchronizedList(new ArrayList<>());
        Params params = Params.defaults().withOverrides(Map.of("SPARKCCL_ALGO", "Direct"));
        ThreadRanks.run(2, params, comm -> {
            SharedBuffer shared = comm.allocateShared(4 * count);
            ReferenceCheck check = new ReferenceCheck(DataType.FLOAT32, ReduceOp.SUM, 2, 5);
            check.fillInput(comm.rank(), shared.address(), 0, count);
            CompletableFuture<String> closer = new CompletableFuture<>();
            if (comm.rank() == 0) {
                new Thread(() -> {
                    try {
                        Thread.sleep(200);
                        shared.close();
                        closer.complete("closed under the call");
                    } catch (Exception e) {
                        closer.complete(String.valueOf(e.getMessage()));
                    }
                }, "closer").start();
            } else {
                Thread.sleep(600); // rank 0 waits inside the call meanwhile
                closer.complete("not rank 0");
            }
            comm.allReduce(shared.address(), shared.address(), count, DataType.FLOAT32, ReduceOp.SUM);
            ReferenceCheck.Result result = check.checkReduced(shared.address(), 0, count);
            outcomes.add("rank " + comm.rank() + " close: " + closer.get(10, TimeUnit.SECONDS) + "; wrong " + result.wrong());
            shared.close();
        });
        String rank0 = outcomes.stream().filter(o -> o.startsWith("rank 0")).findFirst().orElseThrow();
        assertTrue(rank0.contains("cannot close shared buffer #0 of rank 0") && rank0.contains("allReduce #")
                && rank0.contains("close it after that call returns"), rank0);
        assertTrue(outcomes.stream().allMatch(o -> o.endsWith("wrong 0")), outcomes.toString());
        assertEquals(0, LocalMemoryTransport.outstandingBytesInJvm());
    }

    /**
     * 2^31 + 3 one-byte elements (2 GiB per rank) through the ring: the element count and every offset
     * past the int range. Slow and memory-hungry (2 ranks x 2 GiB), so soak only.
     */
    @Test
    @Tag("soak")
    void moreThanTwoToThe31ElementsAreReducedRight() throws Exception {
        long count = (1L << 31) + 3;
        List<String> wrong = Collections.synchronizedList(new ArrayList<>());
        ThreadRanks.run(2, Params.defaults(), comm -> {
            try (HostStagingBuffer buffer = new HostStagingBuffer(count)) {
                ReferenceCheck check = new ReferenceCheck(DataType.INT8, ReduceOp.SUM, 2, 3);
                check.fillInput(comm.rank(), buffer.address(), 0, count);
                comm.allReduce(buffer.address(), buffer.address(), count, DataType.INT8, ReduceOp.SUM);
                ReferenceCheck.Result result = check.checkReduced(buffer.address(), 0, count);
                if (result.wrong() != 0) {
                    wrong.add("rank " + comm.rank() + ": " + result);
                }
            }
        });
        assertEquals(List.of(), wrong);
    }
}
