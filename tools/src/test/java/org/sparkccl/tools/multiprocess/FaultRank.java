package org.sparkccl.tools.multiprocess;

import java.nio.ByteBuffer;
import java.time.Duration;
import org.agrona.BufferUtil;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.DataType;
import org.sparkccl.core.jdk.JdkAccess;
import org.sparkccl.core.PeerFailedException;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.bootstrap.TcpBootstrap;
import org.sparkccl.core.check.ReferenceCheck;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.engine.Engines;
import org.sparkccl.tools.launch.LaunchedRank;

/**
 * One rank of {@link MultiProcessFaultTest}. Modes:
 * <ul>
 *   <li>{@code kill VICTIM COUNT plain|shared}: every rank all-reduces COUNT floats in a loop (in
 *       plain memory, or in a buffer from {@code allocateShared}: the direct all-reduce); after a few rounds
 *       rank VICTIM has itself SIGKILLed from another thread, in the middle of a collective. It prints
 *       {@code KILLING <epoch ms>} first; survivors print {@code CAUGHT <epoch ms> <failed rank> <message>}
 *       and exit 0 when the error names the victim.</li>
 *   <li>{@code mismatch}: twice, on a fresh communicator: the last rank calls with one element more,
 *       then with another type; every rank must fail ({@code CAUGHT count|type <message>}) and exit 0.</li>
 * </ul>
 */
public final class FaultRank {
    private FaultRank() {
    }

    public static void main(String[] args) throws Exception {
        JdkAccess.ensureAgronaAccess();
        LaunchedRank me = LaunchedRank.fromEnvironment();
        try (TcpBootstrap bootstrap = me.bootstrap(Duration.ofMinutes(2))) {
            switch (args[0]) {
                case "kill":
                    System.exit(kill(bootstrap, Integer.parseInt(args[1]), Integer.parseInt(args[2]),
                            args[3].equals("shared")));
                    break;
                case "mismatch":
                    System.exit(mismatch(bootstrap));
                    break;
                default:
                    throw new IllegalArgumentException("unknown mode " + args[0]);
            }
        }
    }

    private static int kill(TcpBootstrap bootstrap, int victim, int count, boolean shared) throws InterruptedException {
        int rank = bootstrap.rank();
        Communicator comm = Engines.host(bootstrap, Params.fromEnvironment());
        ByteBuffer buffer = BufferUtil.allocateDirectAligned(count * 4, 64);
        long address = shared ? comm.allocateShared(count * 4L).address() : BufferUtil.address(buffer);
        new ReferenceCheck(DataType.FLOAT32, ReduceOp.SUM, bootstrap.size(), 1).fillInput(rank, address, 0, count);
        try {
            for (long round = 0; ; round++) {
                if (rank == victim && round == 20) {
                    Thread killer = new Thread(FaultRank::killMyself, "killer");
                    killer.setDaemon(true);
                    killer.start();
                }
                comm.allReduce(address, address, count, DataType.FLOAT32, ReduceOp.MAX);
            }
        } catch (RuntimeException e) {
            int failed = e instanceof PeerFailedException ? ((PeerFailedException) e).failedRank() : -1;
            System.out.println("CAUGHT " + System.currentTimeMillis() + " " + failed + " " + e.getClass().getSimpleName()
                    + ": " + oneLine(e.getMessage()));
            System.out.flush();
            comm.close();
            return failed == victim && e.getMessage().contains("rank " + victim) ? 0 : 1;
        }
    }

    private static void killMyself() {
        try {
            long pid = ProcessHandle.current().pid();
            System.out.println("KILLING " + System.currentTimeMillis());
            System.out.flush();
            new ProcessBuilder("kill", "-KILL", Long.toString(pid)).inheritIO().start().waitFor();
        } catch (Exception e) {
            e.printStackTrace();
            Runtime.getRuntime().halt(5);
        }
    }

    private static int mismatch(TcpBootstrap bootstrap) {
        int rank = bootstrap.rank();
        int last = bootstrap.size() - 1;
        int count = 1000;
        ByteBuffer buffer = BufferUtil.allocateDirectAligned((count + 1) * 8, 64);
        long address = BufferUtil.address(buffer);
        int caught = 0;
        for (String variant : new String[] {"count", "type"}) {
            Communicator comm = Engines.host(bootstrap, Params.fromEnvironment());
            try {
                comm.allReduce(address, address, count, DataType.FLOAT32, ReduceOp.SUM); // agreed: works
                long myCount = rank == last && variant.equals("count") ? count + 1 : count;
                DataType myType = rank == last && variant.equals("type") ? DataType.INT32 : DataType.FLOAT32;
                comm.allReduce(address, address, myCount, myType, ReduceOp.SUM);
                System.out.println("NO ERROR " + variant);
            } catch (RuntimeException e) {
                System.out.println("CAUGHT " + variant + " " + e.getClass().getSimpleName() + ": " + oneLine(e.getMessage()));
                caught++;
            } finally {
                comm.close();
            }
        }
        System.out.flush();
        return caught == 2 ? 0 : 1;
    }

    private static String oneLine(String s) {
        return String.valueOf(s).replace('\n', ' ');
    }
}
