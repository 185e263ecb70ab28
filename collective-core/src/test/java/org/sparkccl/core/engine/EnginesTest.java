package org.sparkccl.core.engine;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.bootstrap.TcpBootstrap;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.shm.ShmTransport;

/** Ranks as threads of one JVM through the shared-memory transport: the path Spark's local mode takes. */
class EnginesTest {

    @Test
    void threadRanksAllReduceThroughShmAndLeaveNothingBehind() throws Exception {
        int n = 4;
        int count = 100_003;
        double[][] inputs = new double[n][count];
        Random random = new Random(3);
        double[] sum = new double[count];
        for (double[] in : inputs) {
            for (int i = 0; i < count; i++) {
                in[i] = random.nextGaussian();
                sum[i] += in[i];
            }
        }
        Params params = Params.defaults().withOverrides(Map.of("SPARKCCL_PROTO", "Simple", "SPARKCCL_NCHANNELS", "2"));
        InetSocketAddress rendezvous = TcpBootstrap.loopback(freePort());
        ExecutorService pool = Executors.newFixedThreadPool(n);
        double[][] results = new double[n][];
        try {
            List<Future<?>> futures = new ArrayList<>();
            for (int r = 0; r < n; r++) {
                int rank = r;
                futures.add(pool.submit(() -> {
                    try (TcpBootstrap bootstrap = TcpBootstrap.connect(rendezvous, rank, n, Duration.ofSeconds(30));
                         Communicator comm = Engines.host(bootstrap, params)) {
                        assertEquals("one host: " + n + " ranks, SHM", comm.layout());
                        double[] data = inputs[rank].clone();
                        comm.allReduce(data, ReduceOp.SUM);
                        results[rank] = data;
                    }
                    return null;
                }));
            }
            for (Future<?> f : futures) {
                f.get(60, TimeUnit.SECONDS);
            }
        } finally {
            pool.shutdownNow();
        }
        for (int i = 0; i < count; i++) {
            assertEquals(sum[i], results[0][i], 1e-12 * n, "element " + i);
        }
        for (int r = 1; r < n; r++) {
            assertArrayEquals(results[0], results[r], "ranks agree bit for bit");
        }
        assertEquals(0, ShmTransport.mappedBytesInJvm());
        try (Stream<java.nio.file.Path> files = Files.list(Paths.get("/dev/shm"))) {
            long ours = files.filter(p -> p.getFileName().toString().startsWith("sparkccl-" + ProcessHandle.current().pid() + "-"))
                    .count();
            assertEquals(0, ours, "segments of this JVM left in /dev/shm");
        }
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }
}
