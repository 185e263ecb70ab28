package org.sparkccl.ipc.gpu;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.sparkccl.core.Bootstrap;
import org.sparkccl.core.DataType;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.check.ReferenceCheck;
import org.sparkccl.core.param.Params;
import org.sparkccl.ipc.cuda.GpuSupport;
import org.sparkccl.tools.launch.LaunchedRank;

/**
 * One rank of {@link GpuCrossProcessTest}, a process of its own (started by RankLauncher): checked
 * AllReduces over CUDA IPC or the staged path; exits 1 on a wrong result, 0 when all were right and
 * nothing leaked. Args: {@code gpus counts...}.
 */
public final class GpuRankMain {
    private GpuRankMain() {
    }

    public static void main(String[] args) throws Exception {
        LaunchedRank me = LaunchedRank.fromEnvironment();
        int gpus = Math.min(Integer.parseInt(args[0]), GpuSupport.deviceCount());
        long[] counts = new long[args.length - 1];
        for (int i = 1; i < args.length; i++) {
            counts[i - 1] = Long.parseLong(args[i]);
        }
        List<String> failures = new ArrayList<>();
        try (Bootstrap bootstrap = me.bootstrap(Duration.ofMinutes(2));
             GpuCommunicator comm = GpuCommunicators.create(bootstrap, me.rank() % gpus, Params.fromEnvironment())) {
            if (me.rank() == 0) {
                System.out.println("cross-process: " + comm.describeLinks());
            }
            GpuTestSupport.Buffers buffers = new GpuTestSupport.Buffers(comm);
            GpuTestSupport.Buffers.CURRENT.set(buffers);
            int k = 0;
            for (DataType type : DataType.values()) {
                for (ReduceOp op : new ReduceOp[] {ReduceOp.SUM, ReduceOp.AVG, ReduceOp.MAX}) {
                    for (long count : counts) {
                        if (count > (1 << 20) && (type != DataType.FLOAT32 || op != ReduceOp.SUM)) {
                            continue; // large counts: one case is enough, the host-side check is slow
                        }
                        String f = GpuTestSupport.allReduceAndCheck(comm, type, op, count, (k++ & 1) == 0,
                                ReferenceCheck.seed(9, type, op, count));
                        if (f != null) {
                            failures.add(f);
                            System.out.println("WRONG: " + f);
                        }
                    }
                }
            }
            comm.barrier();
            buffers.close();
        }
        GpuTestSupport.assertNothingLeaked();
        System.out.println("rank " + me.rank() + ": " + failures.size() + " wrong");
        System.exit(failures.isEmpty() ? 0 : 1);
    }
}
