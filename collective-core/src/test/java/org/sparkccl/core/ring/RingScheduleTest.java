package org.sparkccl.core.ring;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.sparkccl.core.DataType;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.proto.Primitives;

/**
 * The ring schedules, run with primitives that only record: what rank r sends must be, step by
 * step, what rank r+1 receives (same byte counts, same order), and every element of the output must
 * be written exactly once. No memory is touched: addresses are offsets.
 */
class RingScheduleTest {
    private static final long SEND = 1L << 40;
    private static final long RECV = 2L << 40;

    @ParameterizedTest(name = "allReduce n={0} count={1} chunk={2}")
    @CsvSource({"2, 1, 4", "2, 7, 4", "3, 1023, 16", "4, 65537, 256", "5, 13, 1", "8, 300007, 8192", "7, 100, 3"})
    void allReduceSendsPairWithReceivesAndCoverTheOutputOnce(int n, long count, long chunk) {
        int es = 4;
        Recorder[] ranks = new Recorder[n];
        for (int r = 0; r < n; r++) {
            ranks[r] = new Recorder(count * es);
            RingCollectives.allReduce(ranks[r], SEND, RECV, 0, count, es, n, r, chunk);
        }
        checkPairing(ranks);
        for (Recorder r : ranks) {
            r.assertOutputWrittenOnce();
        }
    }

    @ParameterizedTest(name = "reduceScatter/allGather/broadcast n={0} count={1}")
    @CsvSource({"2, 1", "3, 1023", "5, 65537", "8, 7"})
    void otherCollectivesPairUp(int n, long count) {
        int es = 8;
        int[] ring = new int[n];
        for (int i = 0; i < n; i++) {
            ring[i] = i;
        }
        Recorder[] rs = new Recorder[n];
        Recorder[] ag = new Recorder[n];
        Recorder[] bc = new Recorder[n];
        for (int r = 0; r < n; r++) {
            rs[r] = new Recorder(count * es);
            RingCollectives.reduceScatter(rs[r], SEND, RECV, count, 0, count, es, ring, r, 100);
            ag[r] = new Recorder(count * es * n);
            // In place (send is this rank's block of recv), so that no real memory is copied.
            RingCollectives.allGather(ag[r], RECV + r * count * es, RECV, count, 0, count, es, ring, r, 100);
            bc[r] = new Recorder(count * es);
            RingCollectives.broadcast(bc[r], RECV, RECV, 0, count, es, n, r, 1 % n, 100);
        }
        checkPairing(rs);
        checkPairing(ag);
        checkPairing(bc);
        for (int r = 0; r < n; r++) {
            rs[r].assertOutputWrittenOnce();
            bc[r].assertOutputWrittenOnceExceptRoot(r == 1 % n);
        }
    }

    private static void checkPairing(Recorder[] ranks) {
        int n = ranks.length;
        for (int r = 0; r < n; r++) {
            List<Long> sent = ranks[r].sent;
            List<Long> received = ranks[(r + 1) % n].received;
            assertEquals(sent, received, "rank " + r + " sends vs rank " + ((r + 1) % n) + " receives");
        }
    }

    /** Primitives that record byte counts sent and received, and which output bytes were written. */
    static final class Recorder implements Primitives {
        final List<Long> sent = new ArrayList<>();
        final List<Long> received = new ArrayList<>();
        final int[] writes;

        Recorder(long outputBytes) {
            writes = new int[(int) outputBytes];
        }

        @Override
        public void begin(DataType type, ReduceOp op, int nranks) {
        }

        @Override
        public void send(long src, long bytes) {
            if (bytes > 0) {
                sent.add(bytes);
            }
        }

        @Override
        public void recv(long dst, long bytes) {
            if (bytes > 0) {
                received.add(bytes);
            }
            write(dst, bytes);
        }

        @Override
        public void recvReduceSend(long src, long bytes) {
            recvOnly(bytes);
            send(src, bytes);
        }

        @Override
        public void recvReduceCopySend(long src, long dst, long bytes, boolean finish) {
            recv(dst, bytes);
            send(dst, bytes);
        }

        @Override
        public void recvReduceCopy(long src, long dst, long bytes, boolean finish) {
            recv(dst, bytes);
        }

        @Override
        public void recvCopySend(long dst, long bytes) {
            recv(dst, bytes);
            send(dst, bytes);
        }

        private void recvOnly(long bytes) {
            if (bytes > 0) {
                received.add(bytes);
            }
        }

        private void write(long dst, long bytes) {
            long at = dst - RECV;
            for (long i = at; i < at + bytes; i++) {
                writes[(int) i]++;
            }
        }

        void assertOutputWrittenOnce() {
            for (int i = 0; i < writes.length; i++) {
                assertEquals(1, writes[i], "output byte " + i + " written " + writes[i] + " times");
            }
        }

        void assertOutputWrittenOnceExceptRoot(boolean root) {
            for (int i = 0; i < writes.length; i++) {
                assertEquals(root ? 0 : 1, writes[i], "output byte " + i);
            }
        }
    }
}
