package org.sparkccl.ipc.gpu;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.sparkccl.core.DataType;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.proto.ChannelLayout;
import org.sparkccl.core.proto.CollectiveHeader.Kind;
import org.sparkccl.core.proto.Protocol;

/**
 * The kernel's ring schedule (ring_kernels.cu, ringKernel) transcribed to Java and run on threads
 * with STEPS-deep queues as links, on the plans {@link GpuTuner} makes: every element of every rank
 * must come out right, for every collective, rank count, size and protocol. This checks the cutting
 * and step order on the CPU, where the kernels themselves cannot run.
 */
class RingScheduleModelTest {
    private static final ChannelLayout SMALL = new ChannelLayout(8 * 64 * 16, 8 * 4096);

    @Test
    void everyCollectiveCoversEveryElement() throws Exception {
        long[] counts = {1, 7, 1023, 65537};
        for (int n : new int[] {2, 3, 4, 8}) {
            for (long count : counts) {
                for (DataType type : new DataType[] {DataType.FLOAT32, DataType.INT8, DataType.FLOAT16}) {
                    for (String proto : new String[] {"LL", "Simple"}) {
                        for (Kind kind : new Kind[] {Kind.ALL_REDUCE, Kind.REDUCE_SCATTER, Kind.ALL_GATHER, Kind.BROADCAST}) {
                            check(kind, n, count, type, proto, 16, n - 1);
                        }
                    }
                }
            }
        }
    }

    /**
     * Each channel on its own ring out of rank order, as GpuCommunicator connects them: blocks of
     * reduce-scatter and all-gather, and the broadcast root, go by rank, chunks by ring position.
     */
    @Test
    void ringsOutOfRankOrderOnEveryChannel() throws Exception {
        List<int[]> rings = List.of(new int[] {2, 0, 3, 1}, new int[] {1, 3, 0, 2}, new int[] {0, 1, 2, 3});
        for (long count : new long[] {7, 65537}) {
            for (String proto : new String[] {"LL", "Simple"}) {
                for (Kind kind : new Kind[] {Kind.ALL_REDUCE, Kind.REDUCE_SCATTER, Kind.ALL_GATHER, Kind.BROADCAST}) {
                    for (int root : new int[] {0, 3}) {
                        check(kind, 4, count, DataType.FLOAT32, proto, 16, root, rings);
                    }
                }
            }
        }
    }

    @Test
    void largeOddCountWithManyRounds() throws Exception {
        check(Kind.ALL_REDUCE, 2, 4L * 1024 * 1024 + 3, DataType.FLOAT32, "Simple", 16, 0);
        check(Kind.ALL_REDUCE, 3, 300_007, DataType.BFLOAT16, "LL", 4, 0);
    }

    private static void check(Kind kind, int n, long count, DataType type, String proto, int maxChannels, int root)
            throws Exception {
        int[] identity = new int[n];
        for (int i = 0; i < n; i++) {
            identity[i] = i;
        }
        check(kind, n, count, type, proto, maxChannels, root, List.of(identity));
    }

    /** Channel c runs ring {@code rings.get(c mod their number)} (ring[i]: the rank at position i). */
    private static void check(Kind kind, int n, long count, DataType type, String proto, int maxChannels, int root,
                              List<int[]> rings) throws Exception {
        Params params = Params.defaults().withOverrides(java.util.Map.of("SPARKCCL_PROTO", proto));
        GpuPlan plan = new GpuTuner(params, SMALL, maxChannels).plan(kind, count, type, n);
        assertEquals(Protocol.fromName(proto), plan.protocol);
        assertTrue(plan.channels >= 1 && plan.channels <= maxChannels, plan::toString);
        assertTrue((long) (plan.channels - 1) * plan.chunkElems < plan.blockElems, "empty channel: " + plan);
        long slotUnits = (plan.protocol == Protocol.LL ? SMALL.llSlotDataBytes() : SMALL.simpleSlotBytes())
                / (plan.kernel.contains("uint8") ? 1 : type.size());
        assertTrue(plan.sliceElems <= slotUnits, "slice larger than a slot: " + plan);

        // Kernel units: elements, or bytes for the copies.
        boolean copy = kind == Kind.ALL_GATHER || kind == Kind.BROADCAST;
        long units = copy ? count * type.size() : count;
        boolean perRank = kind == Kind.REDUCE_SCATTER || kind == Kind.ALL_GATHER;
        int sendLen = (int) (kind == Kind.REDUCE_SCATTER ? units * n : units);
        int recvLen = (int) (kind == Kind.ALL_GATHER ? units * n : units);
        long[][] send = new long[n][sendLen];
        long[][] recv = new long[n][recvLen];
        Random random = new Random(count * 31 + n);
        for (int r = 0; r < n; r++) {
            for (int i = 0; i < sendLen; i++) {
                send[r][i] = random.nextInt(1 << 20);
            }
            java.util.Arrays.fill(recv[r], -1);
        }
        List<List<BlockingQueue<long[]>>> links = new ArrayList<>(); // links.get(r).get(c): r -> its successor on c
        for (int r = 0; r < n; r++) {
            List<BlockingQueue<long[]>> perChannel = new ArrayList<>();
            for (int c = 0; c < plan.channels; c++) {
                perChannel.add(new ArrayBlockingQueue<>(ChannelLayout.STEPS));
            }
            links.add(perChannel);
        }
        ExecutorService pool = Executors.newCachedThreadPool();
        try {
            List<Future<?>> done = new ArrayList<>();
            for (int r = 0; r < n; r++) {
                for (int c = 0; c < plan.channels; c++) {
                    int rank = r;
                    int channel = c;
                    int[] ring = rings.get(c % rings.size());
                    int pos = 0;
                    while (ring[pos] != rank) {
                        pos++;
                    }
                    int prev = ring[(pos + n - 1) % n];
                    int position = pos;
                    done.add(pool.submit(() -> {
                        new ModelChannel(plan, kind, n, ring, position, channel, root, send[rank], recv[rank],
                                links.get(prev).get(channel), links.get(rank).get(channel)).run();
                        return null;
                    }));
                }
            }
            for (Future<?> f : done) {
                f.get(60, TimeUnit.SECONDS);
            }
        } finally {
            pool.shutdownNow();
        }
        String what = kind + " n=" + n + " count=" + count + " " + type + " root " + root + " " + plan;
        for (int r = 0; r < n; r++) {
            long[] want = new long[recvLen];
            for (int i = 0; i < recvLen; i++) {
                switch (kind) {
                    case ALL_REDUCE: for (int q = 0; q < n; q++) want[i] += send[q][i]; break;
                    case REDUCE_SCATTER: for (int q = 0; q < n; q++) want[i] += send[q][(int) (r * units) + i]; break;
                    case ALL_GATHER: want[i] = send[(int) (i / units)][(int) (i % units)]; break;
                    default: want[i] = send[root][i]; break;
                }
            }
            assertArrayEquals(want, recv[r], "rank " + r + ": " + what);
            assertTrue(perRank || recvLen == units);
        }
    }

    /** One block of ringKernel, line for line, with a queue per link instead of slots. */
    private static final class ModelChannel {
        final GpuPlan p;
        final Kind kind;
        final int n;
        final int[] ring;
        final int r;
        final int me;
        final int c;
        final int root;
        final long[] send;
        final long[] recv;
        final BlockingQueue<long[]> in;
        final BlockingQueue<long[]> out;

        /** {@code r}: this rank's position in {@code ring}, as the kernel's r. */
        ModelChannel(GpuPlan p, Kind kind, int n, int[] ring, int r, int c, int root, long[] send, long[] recv,
                     BlockingQueue<long[]> in, BlockingQueue<long[]> out) {
            this.p = p;
            this.kind = kind;
            this.n = n;
            this.ring = ring;
            this.r = r;
            this.me = ring[r];
            this.c = c;
            this.root = root;
            this.send = send;
            this.recv = recv;
            this.in = in;
            this.out = out;
        }

        static int mod(int a, int n) {
            return ((a % n) + n) % n;
        }

        long offset(int j, long rel) {
            return j * p.blockElems + rel;
        }

        long count(int j, long rel, long len) {
            long s = j * p.blockElems + rel;
            long e = Math.min(Math.min(s + len, (j + 1) * p.blockElems), p.totalElems);
            return Math.max(0, e - s);
        }

        void step(long[] src, long srcOff, long[] dst, long dstOff, long nelem, boolean doRecv, boolean doSend)
                throws InterruptedException {
            long[] v = new long[(int) nelem];
            if (doRecv) {
                long[] got = in.take();
                assertEquals(nelem, got.length, "rank " + me + " channel " + c + " received a step of another size");
                v = got;
            }
            for (int i = 0; i < nelem; i++) {
                if (src != null) {
                    v[i] = doRecv ? v[i] + src[(int) srcOff + i] : src[(int) srcOff + i];
                }
                if (dst != null) {
                    dst[(int) dstOff + i] = v[i];
                }
            }
            if (doSend) {
                out.put(v.clone());
            }
        }

        void run() throws InterruptedException {
            long chBegin = c * p.chunkElems;
            long chLen = Math.max(0, Math.min(p.chunkElems, p.blockElems - chBegin));
            int rootPosition = 0;
            while (rootPosition < n - 1 && ring[rootPosition] != root) {
                rootPosition++;
            }
            int fromRoot = mod(r - rootPosition, n);
            boolean doRecv = kind != Kind.BROADCAST || fromRoot != 0;
            boolean doSend = kind != Kind.BROADCAST || fromRoot != n - 1;
            step(null, 0, null, 0, 4, false, doSend); // header
            if (doRecv) {
                step(null, 0, null, 0, 4, true, false);
            }
            for (long t = 0; t < chLen; t += p.sliceElems) {
                long rel = chBegin + t;
                long len = Math.min(p.sliceElems, chLen - t);
                if (kind == Kind.ALL_REDUCE) {
                    int j = mod(r - 1, n);
                    step(send, offset(j, rel), null, 0, count(j, rel, len), false, true);
                    for (int k = 2; k < n; k++) {
                        j = mod(r - k, n);
                        step(send, offset(j, rel), null, 0, count(j, rel, len), true, true);
                    }
                    j = r;
                    step(send, offset(j, rel), recv, offset(j, rel), count(j, rel, len), true, true);
                    for (int k = 1; k < n - 1; k++) {
                        j = mod(r - k, n);
                        step(null, 0, recv, offset(j, rel), count(j, rel, len), true, true);
                    }
                    j = mod(r + 1, n);
                    step(null, 0, recv, offset(j, rel), count(j, rel, len), true, false);
                } else if (kind == Kind.REDUCE_SCATTER) {
                    int j = ring[mod(r - 1, n)];
                    step(send, offset(j, rel), null, 0, count(j, rel, len), false, true);
                    for (int k = 2; k < n; k++) {
                        j = ring[mod(r - k, n)];
                        step(send, offset(j, rel), null, 0, count(j, rel, len), true, true);
                    }
                    j = me;
                    step(send, offset(j, rel), recv, rel, count(j, rel, len), true, false);
                } else if (kind == Kind.ALL_GATHER) {
                    step(send, rel, recv, offset(me, rel), count(me, rel, len), false, true);
                    for (int k = 1; k < n - 1; k++) {
                        int j = ring[mod(r - k, n)];
                        step(null, 0, recv, offset(j, rel), count(j, rel, len), true, true);
                    }
                    int j = ring[mod(r + 1, n)];
                    step(null, 0, recv, offset(j, rel), count(j, rel, len), true, false);
                } else {
                    long bytes = count(0, rel, len);
                    if (fromRoot == 0) {
                        step(send, rel, recv, rel, bytes, false, true);
                    } else if (fromRoot < n - 1) {
                        step(null, 0, recv, rel, bytes, true, true);
                    } else {
                        step(null, 0, recv, rel, bytes, true, false);
                    }
                }
            }
        }
    }
}
