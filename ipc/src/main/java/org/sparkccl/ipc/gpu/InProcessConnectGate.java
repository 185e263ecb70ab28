package org.sparkccl.ipc.gpu;

import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Holds back the first collective of a rank until every rank of the same communicator that lives in
 * this process has finished connecting. A persistent kernel waits on its peers' kernels; while one
 * runs, another thread of the process that allocates device memory or enables peer access (as the rest
 * of connect does) can be made to wait for the GPU, and so for that kernel: both stop until the
 * collective's timeout. Ranks in other processes have contexts of their own and are not affected.
 *
 * <p>Between collectives, ranks of one process that share a GPU meet the same hazard through each
 * other's allocations; {@link SharedGpuLaunchGate} makes them launch together.
 */
final class InProcessConnectGate {
    private static final Map<String, int[]> CONNECTING = new HashMap<>();

    private InProcessConnectGate() {
    }

    /** Called by each of the {@code inProcess} ranks of communicator {@code id} when its connect is over. */
    static void connected(String id, int inProcess) {
        synchronized (CONNECTING) {
            int[] left = CONNECTING.computeIfAbsent(id, k -> new int[] {inProcess});
            if (--left[0] <= 0) {
                CONNECTING.remove(id);
            }
            CONNECTING.notifyAll();
        }
    }

    /**
     * Waits until every in-process rank of {@code id} has called {@link #connected} (true), or until
     * {@code timeoutMs} passed (false: the caller goes on, and the collective's own timeout reports a
     * rank that never came).
     */
    static boolean awaitAll(String id, long timeoutMs) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        synchronized (CONNECTING) {
            while (CONNECTING.containsKey(id)) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    return false;
                }
                TimeUnit.NANOSECONDS.timedWait(CONNECTING, left);
            }
            return true;
        }
    }
}
