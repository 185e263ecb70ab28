package org.sparkccl.ipc.gpu;

import java.util.concurrent.BrokenBarrierException;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.sparkccl.core.Bootstrap;

/** Ranks as threads of one test: allGather through a shared array and a barrier. */
final class InJvmBootstrap implements Bootstrap {
    private final Group group;
    private final int rank;

    static final class Group {
        final int size;
        final CyclicBarrier barrier;
        final byte[][] slots;

        Group(int size) {
            this.size = size;
            this.barrier = new CyclicBarrier(size);
            this.slots = new byte[size][];
        }
    }

    InJvmBootstrap(Group group, int rank) {
        this.group = group;
        this.rank = rank;
    }

    @Override
    public int rank() {
        return rank;
    }

    @Override
    public int size() {
        return group.size;
    }

    @Override
    public byte[][] allGather(byte[] mine) {
        group.slots[rank] = mine;
        await();
        byte[][] out = group.slots.clone();
        await();
        return out;
    }

    @Override
    public void barrier() {
        await();
    }

    private void await() {
        try {
            group.barrier.await(120, TimeUnit.SECONDS);
        } catch (InterruptedException | BrokenBarrierException | TimeoutException e) {
            throw new IllegalStateException("in-JVM bootstrap failed on rank " + rank, e);
        }
    }
}
