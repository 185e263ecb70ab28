package org.sparkccl.tools.multiprocess;

import java.time.Duration;
import java.util.Map;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.DataType;
import org.sparkccl.core.memory.HostStagingBuffer;
import org.sparkccl.core.jdk.JdkAccess;
import org.sparkccl.core.PeerFailedException;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.bootstrap.TcpBootstrap;
import org.sparkccl.core.check.CollectiveCheck;
import org.sparkccl.core.check.ReferenceCheck;
import org.sparkccl.core.net.SocketCommunicator;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.engine.Engines;
import org.sparkccl.tools.launch.LaunchedRank;

/**
 * One rank of {@link MultiProcessSocketTest}, on {@code HOSTS} pretend hosts (rank r on host
 * r * HOSTS / n; 0: the real host id) with sockets on 127.0.0.1. Modes:
 * <ul>
 *   <li>{@code matrix HOSTS}: every type and op at odd counts against the reference, then the other
 *       collectives; prints {@code ENGINE <class>} and {@code WRONG <n>}, {@code LEFT <bytes>} (socket
 *       and staging memory still allocated after close); exits 1 on any wrong element.</li>
 *   <li>{@code kill VICTIM HOSTS}: all-reduces 1M floats in a loop; the victim SIGKILLs itself
 *       mid-collective after a few rounds ({@code KILLING <ms>}); survivors print
 *       {@code CAUGHT <ms> <failed rank> <message>}. {@code kill-small}: the same with 1000 floats, the
 *       small all-reduce over direct connections.</li>
 * </ul>
 */
public final class SocketRank {
    private SocketRank() {
    }

    public static void main(String[] args) throws Exception {
        JdkAccess.ensureAgronaAccess();
        LaunchedRank me = LaunchedRank.fromEnvironment();
        try (TcpBootstrap bootstrap = me.bootstrap(Duration.ofMinutes(2))) {
            int hosts = Integer.parseInt(args[args.length - 1]);
            Map<String, String> settings = new java.util.HashMap<>(Map.of("SPARKCCL_SOCKET_ADDRESS", "127.0.0.1"));
            if (hosts > 0) {
                settings.put("SPARKCCL_HOST_ID", "pretend-host-" + bootstrap.rank() * hosts / bootstrap.size());
            }
            Params params = Params.fromEnvironment().withOverrides(settings);
            if (args[0].equals("matrix")) {
                System.exit(matrix(bootstrap, params));
            } else {
                System.exit(kill(bootstrap, params, Integer.parseInt(args[1]), args[0].equals("kill-small") ? 1000 : 1 << 20));
            }
        }
    }

    private static int matrix(TcpBootstrap bootstrap, Params params) {
        CollectiveCheck check = new CollectiveCheck(7, System.err);
        try (Communicator comm = Engines.host(bootstrap, params)) {
            System.out.println("ENGINE " + comm.getClass().getSimpleName());
            check.runAll(comm, new long[] {7, 1001}, 4099);
            // Several loops of the ring, slots and connections:
            check.allReduce(comm, DataType.FLOAT32, ReduceOp.SUM, (1L << 20) + 3);
            check.allReduce(comm, DataType.BFLOAT16, ReduceOp.AVG, 65537);
        }
        System.out.println("WRONG " + check.wrong());
        System.out.println("LEFT " + (SocketCommunicator.outstandingBytesInJvm() + HostStagingBuffer.outstandingBytes()));
        System.out.flush();
        return check.wrong() == 0 ? 0 : 1;
    }

    private static int kill(TcpBootstrap bootstrap, Params params, int victim, int count) {
        int rank = bootstrap.rank();
        try (Communicator comm = Engines.host(bootstrap, params);
             HostStagingBuffer data = new HostStagingBuffer(count * 4L)) {
            new ReferenceCheck(DataType.FLOAT32, ReduceOp.SUM, bootstrap.size(), 1).fillInput(rank, data.address(), 0, count);
            try {
                for (long round = 0; ; round++) {
                    if (rank == victim && round == 10) {
                        System.out.println("KILLING " + System.currentTimeMillis());
                        System.out.flush();
                        Runtime.getRuntime().exec(new String[] {"kill", "-KILL", Long.toString(ProcessHandle.current().pid())});
                    }
                    comm.allReduce(data.address(), data.address(), count, DataType.FLOAT32, ReduceOp.MAX);
                }
            } catch (RuntimeException e) {
                int failed = e instanceof PeerFailedException ? ((PeerFailedException) e).failedRank() : -1;
                System.out.println("CAUGHT " + System.currentTimeMillis() + " " + failed + " "
                        + String.valueOf(e.getMessage()).replace('\n', ' '));
                System.out.flush();
                return failed == victim ? 0 : 1;
            }
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }
}
