package org.sparkccl.core.ring;

import org.sparkccl.core.copy.BulkCopy;
import org.sparkccl.core.proto.Primitives;

/**
 * The ring algorithms, written once against {@link Primitives} (as NCCL's all_reduce.h is), for one
 * channel's slice of the data. {@code ring} lists ranks in ring order and {@code pos} is this
 * rank's index in it. Data is cut into loops of {@code n} chunks of up to {@code chunkElems}
 * elements; within a loop every chunk makes one trip round the ring, so slices of any size work
 * (chunks at the tail may be short or empty, identically on every rank).
 */
public final class RingCollectives {
    private RingCollectives() {
    }

    /**
     * Reduce-scatter then all-gather: 2(n-1) steps per loop, and 2(n-1)/n of the data over each link.
     * Elements {@code [begin, end)} of {@code send} are reduced into {@code recv}.
     */
    public static void allReduce(Primitives p, long send, long recv, long begin, long end, int esize,
                                 int n, int pos, long chunkElems) {
        long loop = n * chunkElems;
        for (long base = begin; base < end; base += loop) {
            long realChunk = Math.min(chunkElems, ceilDiv(end - base, n));
            ChunkAt at = new ChunkAt(base, end, realChunk, esize);

            // Step 0: send our part of one chunk to the next rank.
            int c = mod(pos - 1, n);
            p.send(send + at.offset(c), at.bytes(c));
            // Steps 1 .. n-2: add ours to what arrives and pass it on.
            for (int j = 2; j < n; j++) {
                c = mod(pos - j, n);
                p.recvReduceSend(send + at.offset(c), at.bytes(c));
            }
            // Step n-1: the chunk that ends complete here; store it and start its trip round.
            c = pos;
            p.recvReduceCopySend(send + at.offset(c), recv + at.offset(c), at.bytes(c), true);
            // Steps n .. 2n-3: store complete chunks and pass them on.
            for (int j = 1; j < n - 1; j++) {
                c = mod(pos - j, n);
                p.recvCopySend(recv + at.offset(c), at.bytes(c));
            }
            // Last step: the final chunk arrives complete.
            c = mod(pos + 1, n);
            p.recv(recv + at.offset(c), at.bytes(c));
        }
    }

    /**
     * {@code send} holds n blocks of {@code blockCount} elements; this rank ends with block
     * {@code ring[pos]} reduced, in {@code recv}. Elements {@code [begin, end)} of each block.
     */
    public static void reduceScatter(Primitives p, long send, long recv, long blockCount, long begin, long end,
                                     int esize, int[] ring, int pos, long chunkElems) {
        int n = ring.length;
        for (long off = begin; off < end; off += chunkElems) {
            long bytes = Math.min(chunkElems, end - off) * esize;
            int r = ring[mod(pos - 1, n)];
            p.send(send + (r * blockCount + off) * esize, bytes);
            for (int j = 2; j < n; j++) {
                r = ring[mod(pos - j, n)];
                p.recvReduceSend(send + (r * blockCount + off) * esize, bytes);
            }
            r = ring[pos];
            p.recvReduceCopy(send + (r * blockCount + off) * esize, recv + off * esize, bytes, true);
        }
    }

    /** {@code recv} receives n blocks of {@code blockCount}: block r is rank r's {@code send}. */
    public static void allGather(Primitives p, long send, long recv, long blockCount, long begin, long end,
                                 int esize, int[] ring, int pos, long chunkElems) {
        int n = ring.length;
        int me = ring[pos];
        for (long off = begin; off < end; off += chunkElems) {
            long bytes = Math.min(chunkElems, end - off) * esize;
            long mine = recv + (me * blockCount + off) * esize;
            if (send + off * esize != mine) {
                BulkCopy.copy(send + off * esize, mine, bytes);
            }
            p.send(mine, bytes);
            for (int j = 1; j < n - 1; j++) {
                int r = ring[mod(pos - j, n)];
                p.recvCopySend(recv + (r * blockCount + off) * esize, bytes);
            }
            int r = ring[mod(pos + 1, n)];
            p.recv(recv + (r * blockCount + off) * esize, bytes);
        }
    }

    /** A chain from the root round the ring; the rank before the root only receives. */
    public static void broadcast(Primitives p, long send, long recv, long begin, long end, int esize,
                                 int n, int pos, int rootPos, long chunkElems) {
        int fromRoot = mod(pos - rootPos, n);
        for (long off = begin; off < end; off += chunkElems) {
            long bytes = Math.min(chunkElems, end - off) * esize;
            long at = off * esize;
            if (fromRoot == 0) {
                if (send != recv) {
                    BulkCopy.copy(send + at, recv + at, bytes);
                }
                p.send(send + at, bytes);
            } else if (fromRoot < n - 1) {
                p.recvCopySend(recv + at, bytes);
            } else {
                p.recv(recv + at, bytes);
            }
        }
    }

    static int mod(int a, int n) {
        int m = a % n;
        return m < 0 ? m + n : m;
    }

    static long ceilDiv(long a, long b) {
        return (a + b - 1) / b;
    }

    /** Where chunk c of one loop lies: byte offset and length, both clipped to the slice end. */
    static final class ChunkAt {
        private final long base;
        private final long end;
        private final long chunk;
        private final int esize;

        ChunkAt(long base, long end, long chunk, int esize) {
            this.base = base;
            this.end = end;
            this.chunk = chunk;
            this.esize = esize;
        }

        long offset(int c) {
            return Math.min(base + c * chunk, end) * esize;
        }

        long bytes(int c) {
            long from = Math.min(base + c * chunk, end);
            long to = Math.min(base + (c + 1) * chunk, end);
            return (to - from) * esize;
        }
    }
}
