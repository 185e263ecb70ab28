package org.sparkccl.core.bootstrap;

import org.sparkccl.core.CclException;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Ranks as threads of this JVM, meeting on 127.0.0.1. */
@Timeout(60)
class TcpBootstrapTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(20);
    private static final String TOKEN = "job-token-for-tests";

    private final ExecutorService pool = Executors.newCachedThreadPool();

    @AfterEach
    void stopThreads() throws InterruptedException {
        pool.shutdownNow();
        assertTrue(pool.awaitTermination(10, TimeUnit.SECONDS), "rank threads still running");
    }

    @ParameterizedTest
    @ValueSource(ints = {1, 2, 5})
    void allGatherAndBarrierReturnEveryRanksBytes(int n) throws Exception {
        List<Object> results = runGroup(n, TOKEN, b -> {
            for (int round = 1; round <= 4; round++) {
                byte[][] all = b.allGather(payload(b.rank(), round));
                assertEquals(n, all.length);
                for (int r = 0; r < n; r++) {
                    assertArrayEquals(payload(r, round), all[r], "rank " + b.rank() + " round " + round + " part " + r);
                }
                b.barrier();
            }
            return b.rank();
        });
        for (int r = 0; r < n; r++) {
            assertEquals(r, results.get(r));
        }
    }

    @Test
    void ranksThatStartBeforeRankZeroRetryUntilItListens() throws Exception {
        int port = freePort();
        InetSocketAddress address = TcpBootstrap.loopback(port);
        List<Future<byte[][]>> leaves = new ArrayList<>();
        for (int r = 1; r < 3; r++) {
            int rank = r;
            leaves.add(pool.submit(() -> {
                try (TcpBootstrap b = TcpBootstrap.connect(address, rank, 3, TIMEOUT)) {
                    return b.allGather(payload(rank, 1));
                }
            }));
        }
        Thread.sleep(300); // the leaves are now retrying against a closed port
        try (TcpBootstrap root = TcpBootstrap.connect(address, 0, 3, TIMEOUT)) {
            byte[][] all = root.allGather(payload(0, 1));
            assertArrayEquals(payload(2, 1), all[2]);
        }
        for (Future<byte[][]> f : leaves) {
            assertArrayEquals(payload(0, 1), f.get()[0]);
        }
    }

    @Test
    void mismatchedCallsFailOnEveryRankNamingBothCalls() throws Exception {
        List<Object> results = runGroup(3, TOKEN, b -> {
            try {
                if (b.rank() == 2) {
                    b.barrier();
                } else {
                    b.allGather(payload(b.rank(), 1));
                }
                return "no error";
            } catch (CclException e) {
                return e.getMessage();
            }
        });
        for (int r = 0; r < 3; r++) {
            String message = (String) results.get(r);
            assertTrue(message.contains("allGather #1") && message.contains("barrier #1")
                    && message.contains("rank 2"), "rank " + r + ": " + message);
        }
    }

    @Test
    void aRankThatDisconnectsIsNamedOnEveryOtherRank() throws Exception {
        List<Object> results = runGroup(3, TOKEN, b -> {
            if (b.rank() == 2) {
                b.close();
                return "left";
            }
            CclException e = assertThrows(CclException.class, () -> b.allGather(payload(b.rank(), 1)));
            // The bootstrap stays failed: a later call repeats the first error instead of hanging.
            CclException again = assertThrows(CclException.class, b::barrier);
            assertTrue(again.getMessage().contains("failed earlier"), again.getMessage());
            return e.getMessage();
        });
        for (int r = 0; r < 2; r++) {
            String message = (String) results.get(r);
            assertTrue(message.contains("rank 2 closed its bootstrap connection"), "rank " + r + ": " + message);
        }
    }

    @Test
    void connectionsFromAnotherJobOrProgramAreRefusedWhileTheGroupForms() throws Exception {
        try (TcpBootstrap.Rendezvous rendezvous = TcpBootstrap.listen(TcpBootstrap.loopback(0), 2, TIMEOUT, TOKEN)) {
            InetSocketAddress address = rendezvous.localAddress();
            Future<TcpBootstrap> root = pool.submit(rendezvous::awaitRanks);

            // Not a sparkccl bootstrap at all.
            try (Socket garbage = new Socket(address.getAddress(), address.getPort())) {
                OutputStream out = garbage.getOutputStream();
                out.write("GET / HTTP/1.0\r\n\r\n".getBytes(java.nio.charset.StandardCharsets.US_ASCII));
                out.flush();
                assertEquals(-1, drain(garbage), "rank 0 must close a stranger's connection");
            }
            // A rank of another job, on the same port.
            CclException stray = assertThrows(CclException.class,
                    () -> TcpBootstrap.connect(address, 1, 2, TIMEOUT, "another-job"));
            assertTrue(stray.getMessage().contains("another job's token"), stray.getMessage());

            // The real rank 1 still gets in.
            try (TcpBootstrap leaf = TcpBootstrap.connect(address, 1, 2, TIMEOUT, TOKEN);
                 TcpBootstrap zero = root.get(20, TimeUnit.SECONDS)) {
                Future<byte[][]> atZero = pool.submit(() -> zero.allGather(payload(0, 7)));
                byte[][] atOne = leaf.allGather(payload(1, 7));
                assertArrayEquals(payload(0, 7), atOne[0]);
                assertArrayEquals(payload(1, 7), atZero.get()[1]);
            }
        }
    }

    @Test
    void aGroupThatNeverFormsTimesOutNamingTheMissingRanks() {
        try (TcpBootstrap.Rendezvous rendezvous =
                     TcpBootstrap.listen(TcpBootstrap.loopback(0), 3, Duration.ofMillis(300), TOKEN)) {
            CclException e = assertThrows(CclException.class, rendezvous::awaitRanks);
            assertTrue(e.getMessage().contains("ranks [1, 2] did not join"), e.getMessage());
        }
    }

    @Test
    void aRankWithNoRankZeroGivesUpWithAClearMessage() throws IOException {
        InetSocketAddress nobody = TcpBootstrap.loopback(freePort());
        CclException e = assertThrows(CclException.class,
                () -> TcpBootstrap.connect(nobody, 1, 2, Duration.ofMillis(300)));
        assertTrue(e.getMessage().contains("could not reach rank 0"), e.getMessage());
    }

    @Test
    void rankZeroRefusesPortZeroBecauseNobodyCouldFindIt() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> TcpBootstrap.connect(TcpBootstrap.loopback(0), 0, 2, TIMEOUT));
        assertTrue(e.getMessage().contains("TcpBootstrap.listen"), e.getMessage());
    }

    @Test
    void aGroupSizeMismatchIsRefusedWithBothSizes() throws Exception {
        try (TcpBootstrap.Rendezvous rendezvous =
                     TcpBootstrap.listen(TcpBootstrap.loopback(0), 2, Duration.ofSeconds(2), TOKEN)) {
            Future<TcpBootstrap> root = pool.submit(rendezvous::awaitRanks);
            CclException e = assertThrows(CclException.class,
                    () -> TcpBootstrap.connect(rendezvous.localAddress(), 1, 3, TIMEOUT, TOKEN));
            assertTrue(e.getMessage().contains("thinks the group has 3 ranks, rank 0 2"), e.getMessage());
            ExecutionException rootError = assertThrows(ExecutionException.class, root::get);
            assertTrue(rootError.getCause().getMessage().contains("refused connections"), rootError.getCause().getMessage());
        }
    }

    /** Starts n ranks as threads (rank 0 on a free port) and returns what {@code body} returned on each. */
    private List<Object> runGroup(int n, String token, Function<TcpBootstrap, Object> body) throws Exception {
        TcpBootstrap.Rendezvous rendezvous = TcpBootstrap.listen(TcpBootstrap.loopback(0), n, TIMEOUT, token);
        InetSocketAddress address = rendezvous.localAddress();
        List<Future<Object>> futures = new ArrayList<>();
        for (int r = 0; r < n; r++) {
            int rank = r;
            Callable<Object> task = () -> {
                try (TcpBootstrap b = rank == 0 ? rendezvous.awaitRanks()
                        : TcpBootstrap.connect(address, rank, n, TIMEOUT, token)) {
                    assertEquals(rank, b.rank());
                    assertEquals(n, b.size());
                    return body.apply(b);
                }
            };
            futures.add(pool.submit(task));
        }
        List<Object> results = new ArrayList<>();
        for (Future<Object> f : futures) {
            results.add(f.get(40, TimeUnit.SECONDS));
        }
        return results;
    }

    /** Deterministic bytes of varying length (empty included) for a rank and round. */
    private static byte[] payload(int rank, int round) {
        Random random = new Random(rank * 1_000_003L + round);
        byte[] data = new byte[(rank + round) % 4 == 0 ? 0 : random.nextInt(70_000)];
        random.nextBytes(data);
        return data;
    }

    private static int drain(Socket socket) throws IOException {
        socket.setSoTimeout(20_000);
        int last;
        do {
            last = socket.getInputStream().read();
        } while (last != -1);
        return last;
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        }
    }
}
