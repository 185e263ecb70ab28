package org.sparkccl.ipc.gpu;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.sparkccl.tools.launch.LaunchResult;
import org.sparkccl.tools.launch.RankLauncher;

/** Ranks as processes: CUDA IPC between GPUs (or on one GPU), and the host-staged path. */
@Tag("gpu")
class GpuCrossProcessTest {

    private static void launch(int ranks, int gpus, String p2pDisable, String proto, String... counts) {
        String[] args = new String[counts.length + 1];
        args[0] = Integer.toString(gpus);
        System.arraycopy(counts, 0, args, 1, counts.length);
        LaunchResult result = RankLauncher.of(ranks, GpuRankMain.class.getName()).args(args)
                .env("SPARKCCL_P2P_DISABLE", p2pDisable).env("SPARKCCL_PROTO", proto)
                .env("SPARKCCL_NCHANNELS", "4").timeout(Duration.ofMinutes(4)).run();
        assertTrue(result.succeeded(), ranks + " processes, P2P_DISABLE=" + p2pDisable + ", PROTO=" + proto + ": "
                + result.failure() + "\n" + String.join("\n", result.outputTail(result.failedRank() < 0 ? 0
                : result.failedRank())));
    }

    @Test
    void twoProcessesIpcAndStaged() {
        GpuTestSupport.assumeGpus(1);
        int gpus = GpuTestSupport.gpus();
        for (String p2pDisable : new String[] {"0", "1"}) {
            for (String proto : new String[] {"LL", "Simple"}) {
                launch(2, gpus, p2pDisable, proto, "1", "7", "65537", Long.toString(4L * 1024 * 1024 + 3));
            }
        }
    }

    @Test
    void fourProcessesOnTwoGpus() {
        GpuTestSupport.assumeGpus(1);
        // Processes sharing a GPU time-slice (their kernels wait for each other across context switches):
        // small counts test correctness, not speed.
        launch(4, GpuTestSupport.gpus(), "0", "auto", "7", "1023");
    }
}
