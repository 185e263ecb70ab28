package org.sparkccl.tools.multiprocess;

import java.time.Duration;
import java.util.Map;
import java.util.zip.CRC32C;
import org.agrona.UnsafeApi;
import org.sparkccl.core.CclException;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.DataType;
import org.sparkccl.core.memory.HostStagingBuffer;
import org.sparkccl.core.jdk.JdkAccess;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.SharedBuffer;
import org.sparkccl.core.bootstrap.TcpBootstrap;
import org.sparkccl.core.check.ReferenceCheck;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.engine.Engines;
import org.sparkccl.tools.launch.LaunchedRank;
import org.sparkccl.core.shm.ShmTransport;

/**
 * One rank of {@link MultiProcessDirectTest}: all-reduces on shared buffers across processes.
 * Prints on stdout:
 * <ul>
 *   <li>{@code CASE <type/op/count/place> wrong=<n> fold=<same|differs> crc=<crc32c>} for every type
 *       and op (with SPARKCCL_ALGO=Direct, so every count runs direct) and for 4 Mi + 3 floats;</li>
 *   <li>{@code CAUGHT <message>} (or {@code NO ERROR}) after the last rank all-reduced plain memory
 *       while the others used their shared buffers;</li>
 *   <li>{@code MAPPED <bytes>}: /dev/shm still mapped by this process after everything closed.</li>
 * </ul>
 */
public final class DirectRank {
    static final long[] COUNTS = {1, 7, 1023, 65537};
    static final long LARGE = 4L * 1024 * 1024 + 3;
    private static final long SEED = 20_261_130L;

    private DirectRank() {
    }

    public static void main(String[] args) {
        JdkAccess.ensureAgronaAccess();
        LaunchedRank me = LaunchedRank.fromEnvironment();
        long wrongTotal = 0;
        try (TcpBootstrap bootstrap = me.bootstrap(Duration.ofMinutes(2))) {
            Params direct = Params.fromEnvironment().withOverrides(Map.of(
                    "SPARKCCL_ALGO", "Direct", "SPARKCCL_TIMEOUT_MS", "60000"));
            long max = 4 * LARGE;
            try (Communicator comm = Engines.host(bootstrap, direct);
                 SharedBuffer shared = comm.allocateShared(2 * max + 4096);
                 HostStagingBuffer expected = new HostStagingBuffer(max);
                 HostStagingBuffer scratch = new HostStagingBuffer(max)) {
                long send = shared.address();
                long recv = shared.address() + max + 4096;
                for (DataType type : DataType.values()) {
                    for (ReduceOp op : ReduceOp.values()) {
                        for (long count : COUNTS) {
                            for (boolean inPlace : new boolean[] {false, true}) {
                                String key = type.ncclName() + "/" + op.ncclName() + "/" + count + (inPlace ? "/in" : "/out");
                                wrongTotal += runCase(comm, key, type, op, count, inPlace ? recv : send, recv,
                                        expected.address(), scratch.address());
                            }
                        }
                    }
                }
                wrongTotal += runCase(comm, "float/sum/" + LARGE + "/out", DataType.FLOAT32, ReduceOp.SUM, LARGE, send,
                        recv, expected.address(), scratch.address());
            }
            try (Communicator comm = Engines.host(bootstrap, Params.fromEnvironment().withOverrides(
                    Map.of("SPARKCCL_TIMEOUT_MS", "60000")));
                 SharedBuffer shared = comm.allocateShared(400_000);
                 HostStagingBuffer plain = new HostStagingBuffer(400_000)) {
                comm.allReduce(shared.address(), shared.address(), 100_000, DataType.FLOAT32, ReduceOp.SUM); // agreed
                long buffer = comm.rank() == comm.size() - 1 ? plain.address() : shared.address();
                comm.allReduce(buffer, buffer, 100_000, DataType.FLOAT32, ReduceOp.SUM);
                System.out.println("NO ERROR");
            } catch (CclException e) {
                System.out.println("CAUGHT " + String.valueOf(e.getMessage()).replace('\n', ' '));
            }
        }
        System.out.println("MAPPED " + ShmTransport.mappedBytesInJvm());
        System.out.flush();
        System.exit(wrongTotal == 0 ? 0 : 1);
    }

    private static long runCase(Communicator comm, String key, DataType type, ReduceOp op, long count, long src,
                                long recv, long expected, long scratch) {
        ReferenceCheck check = new ReferenceCheck(type, op, comm.size(), ReferenceCheck.seed(SEED, key));
        check.fillInput(comm.rank(), src, 0, count);
        comm.allReduce(src, recv, count, type, op);
        ReferenceCheck.Result result = check.checkReduced(recv, 0, count);
        if (result.wrong() > 0) {
            System.err.println("WRONG " + key + ": " + result);
        }
        check.foldInRankOrder(expected, scratch, count);
        long bytes = count * type.size();
        boolean same = true;
        CRC32C crc = new CRC32C();
        for (long i = 0; i < bytes; i++) {
            byte b = UnsafeApi.getByte(recv + i);
            same &= b == UnsafeApi.getByte(expected + i);
            crc.update(b);
        }
        System.out.println("CASE " + key + " wrong=" + result.wrong() + " fold=" + (same ? "same" : "differs")
                + " crc=" + Long.toHexString(crc.getValue()));
        return result.wrong() + (same ? 0 : 1);
    }
}
