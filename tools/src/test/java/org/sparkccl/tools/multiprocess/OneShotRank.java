package org.sparkccl.tools.multiprocess;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.Map;
import org.agrona.BufferUtil;
import org.sparkccl.core.CclException;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.DataType;
import org.sparkccl.core.jdk.JdkAccess;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.bootstrap.TcpBootstrap;
import org.sparkccl.core.check.ReferenceCheck;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.engine.Engines;
import org.sparkccl.tools.launch.LaunchedRank;

/**
 * One rank of {@link MultiProcessOneShotTest}, with a one-shot threshold of {@link #THRESHOLD}
 * bytes. Prints on stdout:
 * <ul>
 *   <li>{@code CASE <type/op/count/place> wrong=<n> crc=<crc32c>} for every type and op at counts on
 *       both sides of the threshold (the test compares crcs across ranks);</li>
 *   <li>{@code REUSE <calls> wrong=<n>} after that many calls alternating one-shot and ring
 *       all-reduces with broadcasts, on exact integers checked every call;</li>
 *   <li>{@code CAUGHT <message>} (or {@code NO ERROR}) after the last rank all-reduced a count above
 *       the threshold while the others stayed below it.</li>
 * </ul>
 */
public final class OneShotRank {
    static final int THRESHOLD = 4096;
    static final int REUSE_CALLS = 3000;
    private static final long SEED = 20_261_129L;

    private OneShotRank() {
    }

    public static void main(String[] args) {
        JdkAccess.ensureAgronaAccess();
        LaunchedRank me = LaunchedRank.fromEnvironment();
        int rank = me.rank();
        int n = me.size();
        Params params = Params.fromEnvironment().withOverrides(Map.of(
                "SPARKCCL_ONESHOT_THRESHOLD", String.valueOf(THRESHOLD), "SPARKCCL_TIMEOUT_MS", "60000"));
        ByteBuffer sendBuffer = BufferUtil.allocateDirectAligned(2 * THRESHOLD + 64, 64);
        ByteBuffer recvBuffer = BufferUtil.allocateDirectAligned(2 * THRESHOLD + 64, 64);
        long send = BufferUtil.address(sendBuffer);
        long recv = BufferUtil.address(recvBuffer);
        long wrongTotal = 0;
        try (TcpBootstrap bootstrap = me.bootstrap(Duration.ofMinutes(2))) {
            try (Communicator comm = Engines.host(bootstrap, params)) {
                for (DataType type : DataType.values()) {
                    for (ReduceOp op : ReduceOp.values()) {
                        int at = THRESHOLD / type.size();
                        for (long count : new long[] {1, 7, at - 1, at, at + 1}) {
                            for (boolean inPlace : new boolean[] {false, true}) {
                                String key = type.ncclName() + "/" + op.ncclName() + "/" + count + (inPlace ? "/in" : "/out");
                                ReferenceCheck check = new ReferenceCheck(type, op, n, ReferenceCheck.seed(SEED, key));
                                long src = inPlace ? recv : send;
                                check.fillInput(rank, src, 0, count);
                                comm.allReduce(src, recv, count, type, op);
                                ReferenceCheck.Result result = check.checkReduced(recv, 0, count);
                                if (result.wrong() > 0) {
                                    System.err.println("WRONG " + key + ": " + result);
                                }
                                wrongTotal += result.wrong();
                                System.out.println("CASE " + key + " wrong=" + result.wrong() + " crc="
                                        + CollectiveMatrixRank.crc(recvBuffer, count * type.size()));
                            }
                        }
                    }
                }
                long reuseWrong = reuse(comm, send);
                wrongTotal += reuseWrong;
                System.out.println("REUSE " + REUSE_CALLS + " wrong=" + reuseWrong);
            }
            try (Communicator comm = Engines.host(bootstrap, params)) {
                comm.allReduce(send, recv, 10, DataType.FLOAT32, ReduceOp.SUM); // agreed: works
                long count = rank == n - 1 ? THRESHOLD / 4 + 1 : THRESHOLD / 4; // ring on the last rank only
                comm.allReduce(send, recv, count, DataType.FLOAT32, ReduceOp.SUM);
                System.out.println("NO ERROR");
            } catch (CclException e) {
                System.out.println("CAUGHT " + String.valueOf(e.getMessage()).replace('\n', ' '));
            }
        }
        System.out.flush();
        System.exit(wrongTotal == 0 ? 0 : 1);
    }

    /** Calls that alternate a one-shot all-reduce, a ring all-reduce, a broadcast and a one-element one-shot. */
    private static long reuse(Communicator comm, long buffer) {
        int rank = comm.rank();
        int n = comm.size();
        int oneShot = THRESHOLD / 4;
        long wrong = 0;
        for (int call = 0; call < REUSE_CALLS; call++) {
            int kind = call % 4;
            int count = kind == 0 ? oneShot : kind == 1 ? oneShot + 1 : kind == 2 ? 5 : 1;
            for (int i = 0; i < count; i++) {
                org.agrona.UnsafeApi.putInt(buffer + 4L * i, value(rank, call, i));
            }
            if (kind == 2) {
                int root = call % n;
                comm.broadcast(buffer, buffer, count, DataType.INT32, root);
                for (int i = 0; i < count; i++) {
                    wrong += org.agrona.UnsafeApi.getInt(buffer + 4L * i) == value(root, call, i) ? 0 : 1;
                }
                continue;
            }
            comm.allReduce(buffer, buffer, count, DataType.INT32, ReduceOp.SUM);
            for (int i = 0; i < count; i++) {
                int want = 0;
                for (int r = 0; r < n; r++) {
                    want += value(r, call, i);
                }
                wrong += org.agrona.UnsafeApi.getInt(buffer + 4L * i) == want ? 0 : 1;
            }
        }
        return wrong;
    }

    private static int value(int rank, int call, int i) {
        return rank * 1_000_003 + call * 7919 + i * 31;
    }
}
