package org.sparkccl.tools.reliability;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.Random;
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
 * One rank of {@link RandomKillTest}: {@code KillRank POINT VICTIM SEED}. Every rank builds a
 * communicator and all-reduces in a loop until it fails; rank VICTIM SIGKILLs itself at the
 * {@link KillPoint} (with a random delay drawn from SEED, so that each trial hits another moment).
 * The victim prints {@code KILLING <epoch ms>}; a survivor prints
 * {@code CAUGHT <epoch ms> <failed rank or -1> <phase> <exception>: <message>} and exits 0.
 */
public final class KillRank {
    private KillRank() {
    }

    public static void main(String[] args) throws Exception {
        JdkAccess.ensureAgronaAccess();
        KillPoint point = KillPoint.valueOf(args[0]);
        int victim = Integer.parseInt(args[1]);
        Random random = new Random(Long.parseLong(args[2]));
        LaunchedRank me = LaunchedRank.fromEnvironment();
        boolean isVictim = me.rank() == victim;
        String phase = "bootstrap";
        Communicator comm = null;
        try (TcpBootstrap bootstrap = me.bootstrap(Duration.ofMinutes(2))) {
            try {
                if (isVictim && point == KillPoint.BOOTSTRAP) {
                    killMyself(0);
                }
                phase = "connect";
                if (isVictim && point == KillPoint.CONNECT) {
                    killMyself(random.nextInt(300));
                }
                comm = Engines.host(bootstrap, Params.fromEnvironment());
                phase = "allReduce";
                loop(comm, point, isVictim, random);
            } catch (RuntimeException e) {
                int failed = e instanceof PeerFailedException ? ((PeerFailedException) e).failedRank() : -1;
                System.out.println("CAUGHT " + System.currentTimeMillis() + " " + failed + " " + phase + " "
                        + e.getClass().getSimpleName() + ": " + String.valueOf(e.getMessage()).replace('\n', ' '));
                System.out.flush();
            } finally {
                if (comm != null) {
                    comm.close();
                }
            }
        }
        System.exit(0);
    }

    private static void loop(Communicator comm, KillPoint point, boolean isVictim, Random random) {
        int count = point.count;
        ByteBuffer plain = BufferUtil.allocateDirectAligned(count * 4, 64);
        long address = point.shared ? comm.allocateShared(count * 4L).address() : BufferUtil.address(plain);
        new ReferenceCheck(DataType.FLOAT32, ReduceOp.SUM, comm.size(), 1).fillInput(comm.rank(), address, 0, count);
        int killAfter = 1 + random.nextInt(20);
        for (long round = 0; ; round++) {
            if (isVictim && round == killAfter) {
                killMyself(random.nextInt(3));
            }
            comm.allReduce(address, address, count, DataType.FLOAT32, ReduceOp.MAX);
        }
    }

    /** SIGKILLs this process from another thread after {@code delayMs}, while the main thread goes on. */
    private static void killMyself(int delayMs) {
        Thread killer = new Thread(() -> {
            try {
                Thread.sleep(delayMs);
                System.out.println("KILLING " + System.currentTimeMillis());
                System.out.flush();
                new ProcessBuilder("kill", "-KILL", Long.toString(ProcessHandle.current().pid())).inheritIO().start()
                        .waitFor();
                Thread.sleep(60_000); // the signal is on its way; this rank must not go on
            } catch (Exception e) {
                e.printStackTrace();
            }
            Runtime.getRuntime().halt(5);
        }, "killer");
        killer.setDaemon(true);
        killer.start();
        if (delayMs == 0) {
            try {
                killer.join(); // dies here: the point is "before anything else happens"
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
