package org.sparkccl.tools.reliability;

import java.nio.ByteBuffer;
import java.time.Duration;
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
 * One rank of one job of {@link ConcurrentJobsTest}: {@code JobRank SEED ROUNDS}. All-reduces ROUNDS
 * times, in plain and in shared buffers, inputs drawn from SEED (each job its own), and checks every
 * result against the float64 reference: a job that saw the other's buffers would get wrong sums.
 * Prints {@code WRONG <what>} and exits 1 on the first wrong result; exits 0 otherwise.
 */
public final class JobRank {
    private JobRank() {
    }

    public static void main(String[] args) throws Exception {
        JdkAccess.ensureAgronaAccess();
        long seed = Long.parseLong(args[0]);
        int rounds = Integer.parseInt(args[1]);
        int count = 65_537;
        LaunchedRank me = LaunchedRank.fromEnvironment();
        try (TcpBootstrap bootstrap = me.bootstrap(Duration.ofMinutes(2));
             Communicator comm = Engines.host(bootstrap, Params.fromEnvironment())) {
            ByteBuffer plain = BufferUtil.allocateDirectAligned(count * 4, 64);
            long shared = comm.allocateShared(count * 4L).address();
            for (int round = 0; round < rounds; round++) {
                long address = round % 2 == 0 ? BufferUtil.address(plain) : shared;
                ReferenceCheck check = new ReferenceCheck(DataType.FLOAT32, ReduceOp.SUM, comm.size(), seed + round);
                check.fillInput(comm.rank(), address, 0, count);
                comm.allReduce(address, address, count, DataType.FLOAT32, ReduceOp.SUM);
                ReferenceCheck.Result result = check.checkReduced(address, 0, count);
                if (result.wrong() != 0) {
                    System.out.println("WRONG round " + round + ": " + result);
                    System.out.flush();
                    System.exit(1);
                }
            }
        }
        System.out.println("OK " + rounds);
        System.out.flush();
        System.exit(0);
    }
}
