package org.sparkccl.tools.topo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.DataType;
import org.sparkccl.core.shm.ShmCommunicator;
import org.sparkccl.core.memory.HostStagingBuffer;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.bootstrap.ThreadGroupBootstrap;
import org.sparkccl.core.check.ReferenceCheck;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.engine.Engines;
import org.sparkccl.tools.launch.CpuBinding;

/**
 * The host engine orders its ring by NUMA node: four rank threads bound alternately to two CPUs, and a
 * topology file that puts those CPUs on two NUMA nodes (sockets). The ring must cross between the nodes
 * twice, not four times as rank order would, and the collectives must still be right on it.
 */
class HostRingsFromTopologyFileTest {
    private static final int RANKS = 4;
    private static final long COUNT = 70_001;

    @Test
    void ranksOnTwoNodesCrossBetweenThemTwiceAndCollectivesStayRight(@TempDir Path dir) throws Exception {
        List<Integer> cpus = CpuBinding.allowedCpus();
        assumeTrue(cpus.size() >= 2, "needs two CPUs to bind ranks to, this process may use " + cpus);
        int cpuA = cpus.get(0);
        int cpuB = cpus.get(1);
        Path topo = dir.resolve("two-sockets.topo");
        Files.writeString(topo, "numa 0 cpus=" + cpuA + "\nnuma 1 cpus=" + cpuB + "\n");
        Params params = Params.defaults().withOverrides(Map.of("SPARKCCL_TOPO_FILE", topo.toString(),
                "SPARKCCL_ALGO", "Ring"));
        List<String> failures = Collections.synchronizedList(new ArrayList<>());
        List<String> rings = new ThreadGroupBootstrap.Group(RANKS, Duration.ofSeconds(60)).run(bootstrap -> {
            assertNull(CpuBinding.bindCallingThread(bootstrap.rank() % 2 == 0 ? cpuA : cpuB));
            try (Communicator comm = Engines.host(bootstrap, params);
                 HostStagingBuffer send = new HostStagingBuffer(COUNT * RANKS * 4);
                 HostStagingBuffer recv = new HostStagingBuffer(COUNT * RANKS * 4)) {
                check(failures, comm, "allreduce", ReduceOp.SUM, (c, s, r) -> c.allReduce(s, r, COUNT, DataType.FLOAT32,
                        ReduceOp.SUM), send.address(), recv.address(), COUNT, 0);
                check(failures, comm, "reducescatter", ReduceOp.MAX, (c, s, r) -> c.reduceScatter(s, r, COUNT,
                        DataType.FLOAT32, ReduceOp.MAX), send.address(), recv.address(), RANKS * COUNT,
                        comm.rank() * COUNT);
                allGatherAndBroadcast(failures, comm, send.address(), recv.address());
                return ((ShmCommunicator) comm).ring(0).toString();
            }
        }, Duration.ofSeconds(120));
        assertEquals(List.of(), failures);
        for (String ring : rings) {
            assertEquals("0 -> 1 -> 3 -> 2 -> 0", ring, "ranks 0, 2 on node 0 and 1, 3 on node 1: two crossings");
        }
    }

    private interface Call {
        void run(Communicator comm, long send, long recv);
    }

    private static void check(List<String> failures, Communicator comm, String what, ReduceOp op, Call call, long send,
                              long recv, long inputCount, long first) {
        ReferenceCheck check = new ReferenceCheck(DataType.FLOAT32, op, RANKS, ReferenceCheck.seed(7, what));
        check.fillInput(comm.rank(), send, 0, inputCount);
        call.run(comm, send, recv);
        ReferenceCheck.Result result = check.checkReduced(recv, first, COUNT);
        if (result.wrong() > 0) {
            failures.add("rank " + comm.rank() + " " + what + ": " + result);
        }
    }

    private static void allGatherAndBroadcast(List<String> failures, Communicator comm, long send, long recv) {
        ReferenceCheck check = new ReferenceCheck(DataType.FLOAT32, ReduceOp.SUM, RANKS, ReferenceCheck.seed(7, "copies"));
        check.fillInput(comm.rank(), send, 0, COUNT);
        comm.allGather(send, recv, COUNT, DataType.FLOAT32);
        for (int r = 0; r < RANKS; r++) {
            ReferenceCheck.Result block = check.checkCopy(r, recv + r * COUNT * 4, 0, COUNT);
            if (block.wrong() > 0) {
                failures.add("rank " + comm.rank() + " allgather block " + r + ": " + block);
            }
        }
        comm.broadcast(send, recv, COUNT, DataType.FLOAT32, 3);
        ReferenceCheck.Result result = check.checkCopy(3, recv, 0, COUNT);
        if (result.wrong() > 0) {
            failures.add("rank " + comm.rank() + " broadcast: " + result);
        }
    }
}
