package org.sparkccl.core.bootstrap;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.time.Duration;
import java.util.Arrays;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import net.jqwik.api.Assume;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.Size;
import net.jqwik.api.lifecycle.AfterProperty;
import net.jqwik.api.lifecycle.BeforeProperty;

/**
 * Random and mutated hellos sent to a forming TcpBootstrap group: rank 0 refuses each one with an
 * error frame that says why, promptly, and keeps waiting; after all of them the real rank 1 joins
 * and the group works.
 *
 * <p>Each property runs jqwik's default number of tries: 1,000 in {@code mvn verify}, 10,000 with
 * {@code -Psoak} (the {@code jqwik.tries} property of the build).
 */
class BootstrapHelloFuzzTest {
    private static final String TOKEN = "job-a-7f3c";
    /** The hello the real rank 1 of 2 sends (TcpBootstrap.join): rank, size and token, sealed. */
    private static final byte[] VALID = hello(1, 2, TOKEN);

    private TcpBootstrap.Rendezvous rendezvous;
    private InetSocketAddress address;
    private CompletableFuture<TcpBootstrap> rank0;

    @BeforeProperty
    void listen() {
        rendezvous = TcpBootstrap.listen(new InetSocketAddress("127.0.0.1", 0), 2, Duration.ofMinutes(10), TOKEN);
        address = rendezvous.localAddress();
        rank0 = CompletableFuture.supplyAsync(rendezvous::awaitRanks);
    }

    @AfterProperty
    void theRealRankStillJoins() throws Exception {
        try (TcpBootstrap rank1 = TcpBootstrap.connect(address, 1, 2, Duration.ofSeconds(30), TOKEN);
             TcpBootstrap zero = rank0.get(30, TimeUnit.SECONDS)) {
            CompletableFuture<byte[][]> atZero = CompletableFuture.supplyAsync(() -> zero.allGather(new byte[] {0}));
            byte[][] all = rank1.allGather(new byte[] {1});
            assertArrayEquals(all, atZero.get(30, TimeUnit.SECONDS));
            assertEquals(1, all[1][0]);
        }
    }

    @Property
    void randomHellosAreRefused(@ForAll @Size(max = 100) byte[] bytes) throws IOException {
        assertRefused(bytes);
    }

    @Property
    void mutatedHellosAreRefused(@ForAll long seed) throws IOException {
        assertRefused(mutated(seed));
    }

    private void assertRefused(byte[] bytes) throws IOException {
        Assume.that(!Arrays.equals(bytes, VALID));
        long start = System.nanoTime();
        try (Socket socket = new Socket()) {
            socket.connect(address, 5_000);
            socket.setSoTimeout(10_000);
            socket.getOutputStream().write(bytes);
            socket.shutdownOutput(); // what a sender that stops looks like; rank 0 must not wait for more
            DataInputStream in = new DataInputStream(socket.getInputStream());
            assertEquals(1, in.readByte(), "status byte of the answer: an error");
            String why = in.readUTF();
            assertTrue(why.startsWith("refused by rank 0 at "), why);
        }
        long ms = (System.nanoTime() - start) / 1_000_000;
        assertTrue(ms < 2_000, "refusal took " + ms + " ms");
    }

    /** The valid hello with 1..3 bytes changed, or cut short: never the valid hello itself. */
    private static byte[] mutated(long seed) {
        Random random = new Random(seed);
        byte[] bytes = VALID.clone();
        if (random.nextBoolean()) {
            return Arrays.copyOf(bytes, random.nextInt(bytes.length));
        }
        for (int i = 1 + random.nextInt(3); i > 0; i--) {
            bytes[random.nextInt(bytes.length)] ^= (byte) (1 + random.nextInt(255));
        }
        return bytes;
    }

    private static byte[] hello(int rank, int size, String token) {
        try {
            ByteArrayOutputStream bytes = new ByteArrayOutputStream();
            DataOutputStream out = new DataOutputStream(bytes);
            out.writeInt(rank);
            out.writeInt(size);
            out.writeUTF(token);
            out.flush();
            return TcpBootstrap.FORMAT.seal(bytes.toByteArray());
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }
}
