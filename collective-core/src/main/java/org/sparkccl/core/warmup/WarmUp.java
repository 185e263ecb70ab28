package org.sparkccl.core.warmup;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.agrona.UnsafeApi;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.DataType;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.jdk.JdkAccess;
import org.sparkccl.core.memory.HostStagingBuffer;

/**
 * The all-reduces a host communicator makes when it is built ({@code SPARKCCL_WARMUP_CALLS}), every
 * rank together, on scratch memory: a fresh JVM's first calls otherwise load the collective's
 * classes and run interpreted, which cost a job's first 1 KB calls milliseconds each where later
 * ones take microseconds (allreduce-perf --first-calls; docs/perf/cpu-allreduce-notes.md).
 *
 * <p>The calls go round the sizes a job's small calls take, in and out of place: 4 B and 64 B (below
 * the reductions' heap blocks), 1 KB and 8 KB (through them, {@code reduce.HeapBlocks}: its class,
 * its per-thread blocks and its loops; a warm-up of tiny calls alone left those to the job's first 1
 * KB call). So every branch of the small path has run, and its methods have passed C1's threshold
 * (200 calls), before the job's first call. Large calls are not warmed: their loops run long enough
 * in one call to be compiled inside it.
 */
public final class WarmUp {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    /** Elements per call, float32: 4 B, 64 B, 1 KB, 8 KB. */
    private static final long[] COUNTS = {1, 16, 256, 2048};
    private static final long SCRATCH_BYTES = 2 * COUNTS[COUNTS.length - 1] * Float.BYTES;

    /** The communicator classes whose warm-up has run to the end in this JVM: their small path is compiled. */
    private static final Set<Class<?>> WARMED = ConcurrentHashMap.newKeySet();

    private WarmUp() {
    }

    /**
     * Whether a communicator of {@code engine}'s class has run its warm-up in this JVM: the JIT's code
     * belongs to the JVM, so a later communicator there (a later fit, the next stage) gains nothing
     * from another one. Engines tell it in their bootstrap round and skip the warm-up only where every
     * rank says so, so that the ranks still make the same calls.
     */
    public static boolean doneInThisJvm(Class<? extends Communicator> engine) {
        return WARMED.contains(engine);
    }

    /** Makes {@code calls} all-reduces on {@code comm}. Collective: every rank with the same {@code calls}. */
    public static void run(Communicator comm, int calls) {
        if (calls <= 0 || comm.size() == 1) {
            return;
        }
        try (HostStagingBuffer scratch = new HostStagingBuffer(SCRATCH_BYTES)) {
            long send = scratch.address();
            UnsafeApi.setMemory(send, SCRATCH_BYTES, (byte) 0);
            for (int i = 0; i < calls; i++) {
                long count = COUNTS[(i >> 1) % COUNTS.length];
                long recv = i % 2 == 0 ? send : send + SCRATCH_BYTES / 2;
                comm.allReduce(send, recv, count, DataType.FLOAT32, ReduceOp.SUM);
            }
        }
        WARMED.add(comm.getClass());
    }
}
