package org.sparkccl.ipc.gpu;

import java.nio.ByteBuffer;
import java.util.List;
import java.util.Map;
import org.agrona.BufferUtil;
import org.junit.jupiter.api.Assumptions;
import org.sparkccl.core.DataType;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.bootstrap.ThreadGroupBootstrap;
import org.sparkccl.core.check.ReferenceCheck;
import org.sparkccl.core.param.Params;
import org.sparkccl.ipc.cuda.DeviceBuffer;
import org.sparkccl.ipc.cuda.GpuSupport;
import org.sparkccl.ipc.cuda.HostRegistration;
import org.sparkccl.ipc.cuda.PinnedHostBuffer;
import org.sparkccl.ipc.cuda.ShareableDeviceMemory;
import org.sparkccl.core.shm.ShmTransport;

/** Skips without GPUs (printing why), runs ranks as threads, and moves checked data to and from GPUs. */
final class GpuTestSupport {
    private GpuTestSupport() {
    }

    /** Aborts the test (skipped, with the reason printed) unless {@code gpus} GPUs can be used. */
    static void assumeGpus(int gpus) {
        String reason = GpuSupport.unavailableReason();
        if (reason != null) {
            System.out.println("SKIPPED (no GPU): " + reason);
            Assumptions.abort("no GPU: " + reason);
        }
        if (GpuSupport.deviceCount() < gpus) {
            String why = "needs " + gpus + " GPUs, this machine has " + GpuSupport.deviceCount();
            System.out.println("SKIPPED: " + why);
            Assumptions.abort(why);
        }
    }

    /** Two GPUs where there are two or more; one where there is only one (ranks then share it). */
    static int gpus() {
        int n = Math.min(2, GpuSupport.deviceCount());
        if (n < 2) {
            System.out.println("NOTE: one GPU here: the ranks share it (same-process ranks run concurrently)");
        }
        return n;
    }

    static Params params(String... keyValues) {
        Map<String, String> m = new java.util.LinkedHashMap<>();
        for (int i = 0; i < keyValues.length; i += 2) {
            m.put(keyValues[i], keyValues[i + 1]);
        }
        return Params.fromEnvironment().withOverrides(m); // SPARKCCL_TIMEOUT_MS and others from the run
    }

    @FunctionalInterface
    interface RankBody {
        void run(GpuCommunicator comm) throws Exception;
    }

    /** Largest test buffer: 4Mi+3 elements of 8 bytes, or 8 ranks' blocks of 65537 floats. */
    static final long MAX_BYTES = 8L * (4L * 1024 * 1024 + 3);

    /**
     * Each rank's test buffers, allocated once before its collectives and freed after all of them:
     * {@code cuMemFree} can wait for the whole GPU, so a rank that frees memory between collectives
     * would wait for a peer's kernel that waits for it (ranks of one process sharing a GPU).
     */
    static final class Buffers {
        static final ThreadLocal<Buffers> CURRENT = new ThreadLocal<>();
        final DeviceBuffer a;
        final DeviceBuffer b;

        Buffers(GpuCommunicator comm) {
            a = DeviceBuffer.allocate(comm.device(), MAX_BYTES, "test");
            b = DeviceBuffer.allocate(comm.device(), MAX_BYTES, "test");
        }

        static Buffers of() {
            return CURRENT.get();
        }

        void close() {
            a.close();
            b.close();
        }
    }

    /** The rank the calling test thread runs (for per-rank cancel flags). */
    static final ThreadLocal<Integer> RANK = new ThreadLocal<>();

    /** {@code ranks} threads, rank r on GPU r mod gpus, each building a communicator and running {@code body}. */
    static void runRanks(int ranks, int gpus, Params params, RankBody body) throws Exception {
        runRanks(ranks, gpus, params, () -> false, body);
    }

    /** As above; every rank's communicator polls {@code cancelled} (a Spark task's killed flag). */
    static void runRanks(int ranks, int gpus, Params params, java.util.function.BooleanSupplier cancelled, RankBody body)
            throws Exception {
        ThreadGroupBootstrap.Group group = new ThreadGroupBootstrap.Group(ranks, java.time.Duration.ofSeconds(120));
        group.run(bootstrap -> {
            int rank = bootstrap.rank();
            try (GpuCommunicator comm = GpuCommunicators.create(bootstrap, rank % gpus, params, cancelled)) {
                Buffers buffers = new Buffers(comm);
                Buffers.CURRENT.set(buffers);
                RANK.set(rank);
                // No rank allocates device memory while a peer's kernel runs (it may wait for that kernel).
                bootstrap.barrier();
                try {
                    body.run(comm);
                } finally {
                    Buffers.CURRENT.remove();
                    bootstrap.barrier(); // every rank is done with its collectives before memory is freed
                    buffers.close();
                }
            }
            return null;
        }, java.time.Duration.ofMinutes(10));
        assertNothingLeaked();
    }

    static void assertNothingLeaked() {
        org.junit.jupiter.api.Assertions.assertEquals(0, DeviceBuffer.outstandingBytes(), "device memory leaked");
        org.junit.jupiter.api.Assertions.assertEquals(0, PinnedHostBuffer.outstandingBytes(), "pinned memory leaked");
        org.junit.jupiter.api.Assertions.assertEquals(0, HostRegistration.outstandingBytes(), "host registrations leaked");
        org.junit.jupiter.api.Assertions.assertEquals(0, ShareableDeviceMemory.outstandingBytes(),
                "shareable device memory (GPU windows) leaked");
        org.junit.jupiter.api.Assertions.assertEquals(0, ShareableDeviceMemory.importedBytes(),
                "imported peer windows leaked");
        org.junit.jupiter.api.Assertions.assertEquals(0, ShmTransport.mappedBytesInJvm(), "shm mappings leaked");
    }

    /**
     * Runs one collective of {@code kind} on device buffers filled with rank inputs (the receive buffer
     * poisoned first) and returns the number of wrong elements with the first one described, or null.
     */
    static String allReduceAndCheck(GpuCommunicator comm, DataType type, ReduceOp op, long count, boolean inPlace,
                                    long seed) {
        int n = comm.size();
        int r = comm.rank();
        ReferenceCheck check = new ReferenceCheck(type, op, n, seed);
        long bytes = Math.max(1, count * type.size());
        ByteBuffer host = ByteBuffer.allocateDirect((int) bytes);
        long hostAddress = BufferUtil.address(host);
        Buffers buffers = Buffers.of();
        DeviceBuffer send = buffers.a;
        DeviceBuffer out = inPlace ? send : buffers.b;
        check.fillInput(r, hostAddress, 0, count);
        send.copyFromHost(0, hostAddress, count * type.size(), comm.stream());
        if (!inPlace) {
            poison(out, comm);
        }
        comm.allReduce(send.address(), out.address(), count, type, op);
        out.copyToHost(0, hostAddress, count * type.size(), comm.stream());
        ReferenceCheck.Result result = check.checkReduced(hostAddress, 0, count);
        java.lang.ref.Reference.reachabilityFence(host); // the raw address is all the check holds
        return result.wrong() == 0 ? null : "rank " + r + " " + type.ncclName() + " " + op.ncclName() + " count "
                + count + (inPlace ? " in place" : "") + ": " + result;
    }

    static void poison(DeviceBuffer buffer, GpuCommunicator comm) {
        buffer.fill((byte) 0x7f, comm.stream());
    }
}
