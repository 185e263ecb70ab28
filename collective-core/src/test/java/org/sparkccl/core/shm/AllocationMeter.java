package org.sparkccl.core.shm;

import java.lang.management.ManagementFactory;

/** Bytes the calling thread allocated on the heap: lets fuzz tests prove that a parser allocates within bounds. */
public final class AllocationMeter {
    private static final com.sun.management.ThreadMXBean THREADS =
            (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();

    private AllocationMeter() {
    }

    public static long allocatedBytes() {
        return THREADS.getThreadAllocatedBytes(Thread.currentThread().getId());
    }
}
