package org.sparkccl.tools.multiprocess;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.zip.CRC32C;
import org.agrona.BufferUtil;
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
 * One rank of {@link MultiProcessCollectivesTest}: runs the whole matrix (both protocols, every type
 * and op, every count, in and out of place, plus reduce-scatter, all-gather, broadcast and barrier) in
 * this one JVM, so that a group of N ranks costs N JVM starts, not N per case.
 *
 * <p>Prints one line per case on stdout: {@code CASE <key> wrong=<n> crc=<crc32c of the result>}
 * (crc {@code -} where ranks legitimately differ); the test compares the lines across ranks. Exits 1
 * when any element was wrong, after printing the first wrong element of each such case on stderr.
 */
public final class CollectiveMatrixRank {
    static final List<String> PROTOCOLS = List.of("LL", "Simple");
    static final long[] COUNTS = {1, 7, 1023, 65537};
    static final long LARGE_COUNT = (4L << 20) + 3;
    /** The largest count costs seconds per case on 2 cores, so it runs for these (type, op) pairs only. */
    static final List<Map.Entry<DataType, ReduceOp>> LARGE_CASES = List.of(
            Map.entry(DataType.FLOAT32, ReduceOp.SUM),
            Map.entry(DataType.BFLOAT16, ReduceOp.AVG),
            Map.entry(DataType.INT8, ReduceOp.PROD));
    static final long[] OTHER_COLLECTIVE_COUNTS = {7, 65537};
    static final List<Map.Entry<DataType, ReduceOp>> REDUCE_SCATTER_CASES = List.of(
            Map.entry(DataType.FLOAT32, ReduceOp.SUM),
            Map.entry(DataType.FLOAT16, ReduceOp.MAX),
            Map.entry(DataType.INT32, ReduceOp.AVG),
            Map.entry(DataType.UINT8, ReduceOp.MIN));
    static final List<DataType> COPY_TYPES = List.of(DataType.INT8, DataType.FLOAT16, DataType.FLOAT64);
    private static final long SEED = 20_260_101L;

    private final Communicator comm;
    private final int rank;
    private final int n;
    private final String proto;
    private final ByteBuffer sendBuffer;
    private final ByteBuffer recvBuffer;
    private final long send;
    private final long recv;
    private long wrongTotal;
    private int cases;

    private CollectiveMatrixRank(Communicator comm, String proto, ByteBuffer sendBuffer, ByteBuffer recvBuffer) {
        this.comm = comm;
        this.rank = comm.rank();
        this.n = comm.size();
        this.proto = proto;
        this.sendBuffer = sendBuffer;
        this.recvBuffer = recvBuffer;
        this.send = BufferUtil.address(sendBuffer);
        this.recv = BufferUtil.address(recvBuffer);
    }

    /** Cases each rank reports per protocol, so that the test can tell a skipped case from a missing line. */
    static int casesPerProtocol(boolean large) {
        int allReduce = DataType.values().length * ReduceOp.values().length * COUNTS.length * 2
                + (large ? LARGE_CASES.size() * 2 : 0);
        int reduceScatter = REDUCE_SCATTER_CASES.size() * OTHER_COLLECTIVE_COUNTS.length * 2;
        int copies = COPY_TYPES.size() * OTHER_COLLECTIVE_COUNTS.length * 2 * 2; // all-gather and broadcast
        return allReduce + reduceScatter + copies + 1; // and the barrier
    }

    /** Args: "large" to include the largest count. */
    public static void main(String[] args) {
        boolean large = args.length > 0 && args[0].equals("large");
        JdkAccess.ensureAgronaAccess();
        LaunchedRank me = LaunchedRank.fromEnvironment();
        long maxElems = Math.max(large ? LARGE_COUNT : 0, COUNTS[COUNTS.length - 1] * me.size());
        int capacity = (int) (maxElems * 8);
        ByteBuffer sendBuffer = BufferUtil.allocateDirectAligned(align(capacity), 64);
        ByteBuffer recvBuffer = BufferUtil.allocateDirectAligned(align(capacity), 64);
        long wrong = 0;
        try (TcpBootstrap bootstrap = me.bootstrap(Duration.ofMinutes(2))) {
            for (String proto : PROTOCOLS) {
                Params params = Params.fromEnvironment().withOverrides(Map.of("SPARKCCL_PROTO", proto));
                try (Communicator comm = Engines.host(bootstrap, params)) {
                    CollectiveMatrixRank matrix = new CollectiveMatrixRank(comm, proto, sendBuffer, recvBuffer);
                    matrix.run(large);
                    wrong += matrix.wrongTotal;
                }
            }
        }
        System.out.flush();
        System.exit(wrong == 0 ? 0 : 1);
    }

    private static int align(int bytes) {
        return (bytes + 63) / 64 * 64;
    }

    private void run(boolean large) {
        long start = System.nanoTime();
        for (DataType type : DataType.values()) {
            for (ReduceOp op : ReduceOp.values()) {
                for (long count : COUNTS) {
                    allReduce(type, op, count, false);
                    allReduce(type, op, count, true);
                }
            }
        }
        start = phase("allreduce", start);
        if (large) {
            for (Map.Entry<DataType, ReduceOp> c : LARGE_CASES) {
                allReduce(c.getKey(), c.getValue(), LARGE_COUNT, false);
                allReduce(c.getKey(), c.getValue(), LARGE_COUNT, true);
            }
            start = phase("allreduce " + LARGE_COUNT, start);
        }
        for (Map.Entry<DataType, ReduceOp> c : REDUCE_SCATTER_CASES) {
            for (long count : OTHER_COLLECTIVE_COUNTS) {
                reduceScatter(c.getKey(), c.getValue(), count, false);
                reduceScatter(c.getKey(), c.getValue(), count, true);
            }
        }
        for (DataType type : COPY_TYPES) {
            for (long count : OTHER_COLLECTIVE_COUNTS) {
                allGather(type, count, false);
                allGather(type, count, true);
                broadcast(type, count, false);
                broadcast(type, count, true);
            }
        }
        for (int i = 0; i < 3; i++) {
            comm.barrier();
        }
        phase("reducescatter, allgather, broadcast, barrier", start);
        System.out.println("CASE barrier/" + proto + " wrong=0 crc=-");
    }

    /** Rank 0 says how long each part took (stderr, so that the test shows it): the matrix must stay cheap. */
    private long phase(String name, long since) {
        long now = System.nanoTime();
        if (rank == 0) {
            System.err.printf("PHASE %s %s: %.1f s%n", proto, name, (now - since) / 1e9);
        }
        return now;
    }

    private void allReduce(DataType type, ReduceOp op, long count, boolean inPlace) {
        String key = key("allreduce", type, op.ncclName(), count, inPlace);
        ReferenceCheck check = new ReferenceCheck(type, op, n, ReferenceCheck.seed(SEED, key));
        long src = inPlace ? recv : send;
        check.fillInput(rank, src, 0, count);
        comm.allReduce(src, recv, count, type, op);
        // Every rank's result must match rank 0's bit for bit (the test compares the crcs), so above
        // a few thousand elements one rank checking the reference is as good as all, at 1/n of the
        // cost: the ranks take turns.
        boolean mine = count <= 1023 || (cases % n) == rank;
        cases++;
        ReferenceCheck.Result result = mine ? check.checkReduced(recv, 0, count) : new ReferenceCheck.Result(0, null);
        report(key, result, crc(recvBuffer, count * type.size()));
    }

    /** In place, as NCCL defines it: this rank's block of the send buffer is the receive buffer. */
    private void reduceScatter(DataType type, ReduceOp op, long count, boolean inPlace) {
        String key = key("reducescatter", type, op.ncclName(), count, inPlace);
        ReferenceCheck check = new ReferenceCheck(type, op, n, ReferenceCheck.seed(SEED, key));
        long es = type.size();
        long src = inPlace ? recv : send;
        long dst = inPlace ? recv + rank * count * es : recv;
        if (!inPlace) {
            // Something else than the answer where the answer goes, so that a skipped write shows.
            check.fillInput((rank + 1) % n, recv, 0, count);
        }
        check.fillInput(rank, src, 0, n * count);
        comm.reduceScatter(src, dst, count, type, op);
        report(key, check.checkReduced(dst, rank * count, count), "-");
    }

    /** In place, as NCCL defines it: this rank's send is its block of the receive buffer. */
    private void allGather(DataType type, long count, boolean inPlace) {
        String key = key("allgather", type, "-", count, inPlace);
        ReferenceCheck check = new ReferenceCheck(type, ReduceOp.SUM, n, ReferenceCheck.seed(SEED, key));
        long es = type.size();
        long src = inPlace ? recv + rank * count * es : send;
        check.fillInput(rank, src, 0, count);
        comm.allGather(src, recv, count, type);
        long wrong = 0;
        String first = null;
        for (int r = 0; r < n; r++) {
            ReferenceCheck.Result block = check.checkCopy(r, recv + r * count * es, 0, count);
            if (block.wrong() > 0 && first == null) {
                first = "block of rank " + r + ": " + block.firstWrong();
            }
            wrong += block.wrong();
        }
        report(key, new ReferenceCheck.Result(wrong, first), crc(recvBuffer, n * count * es));
    }

    private void broadcast(DataType type, long count, boolean inPlace) {
        String key = key("broadcast", type, "-", count, inPlace);
        int root = (int) (count % n);
        ReferenceCheck check = new ReferenceCheck(type, ReduceOp.SUM, n, ReferenceCheck.seed(SEED, key));
        long src = inPlace ? recv : send;
        // Every rank fills its own data; only root's may arrive.
        check.fillInput(rank, src, 0, count);
        if (!inPlace) {
            check.fillInput((rank + 1) % n, recv, 0, count);
        }
        comm.broadcast(src, recv, count, type, root);
        report(key + "/root" + root, check.checkCopy(root, recv, 0, count), crc(recvBuffer, count * type.size()));
    }

    private String key(String collective, DataType type, String op, long count, boolean inPlace) {
        return collective + "/" + proto + "/" + type.ncclName() + "/" + op + "/" + count + "/" + (inPlace ? "in" : "out");
    }

    private void report(String key, ReferenceCheck.Result result, String crc) {
        if (result.wrong() > 0) {
            System.err.println("WRONG " + key + ": " + result);
            wrongTotal += result.wrong();
        }
        System.out.println("CASE " + key + " wrong=" + result.wrong() + " crc=" + crc);
    }

    /** CRC32C of the first {@code bytes} of {@code buffer}, in hex: what the tests compare across ranks. */
    static String crc(ByteBuffer buffer, long bytes) {
        CRC32C crc = new CRC32C();
        ByteBuffer view = buffer.duplicate();
        view.clear().limit((int) bytes);
        crc.update(view);
        return Long.toHexString(crc.getValue());
    }
}
