package org.sparkccl.core.os;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.List;
import java.util.Random;
import java.util.stream.Stream;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link DescriptorServer} with a plain file's descriptor (no GPU): the peer gets a descriptor of its
 * own for the same open file, refusals, and nothing left open afterwards.
 */
class DescriptorServerTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(5);
    private static final Path FDS = Paths.get("/proc/self/fd");

    @TempDir
    Path dir;

    @BeforeEach
    void linuxWithLibC() {
        Assumptions.assumeTrue(Files.isDirectory(FDS), "needs Linux's /proc/self/fd");
        Assumptions.assumeTrue(LibC.unavailableReason() == null, LibC.unavailableReason());
    }

    private static byte[] secret(long seed) {
        byte[] s = new byte[DescriptorServer.SECRET_BYTES];
        new Random(seed).nextBytes(s);
        return s;
    }

    /** The descriptor of this process that refers to {@code file}. */
    private static int descriptorOf(Path file) throws IOException {
        Path real = file.toRealPath();
        try (Stream<Path> fds = Files.list(FDS)) {
            for (Path fd : (Iterable<Path>) fds::iterator) {
                try {
                    if (Files.readSymbolicLink(fd).equals(real)) {
                        return Integer.parseInt(fd.getFileName().toString());
                    }
                } catch (IOException e) {
                    // The listing's own descriptor is gone already.
                }
            }
        }
        throw new AssertionError("no descriptor of this process refers to " + file);
    }

    /** This process's sockets and descriptors of files in the test's folder. */
    private long socketsAndTestFiles() throws IOException {
        try (Stream<Path> fds = Files.list(FDS)) {
            return fds.filter(fd -> {
                try {
                    String target = Files.readSymbolicLink(fd).toString();
                    return target.startsWith("socket:") || target.startsWith(dir.toRealPath().toString());
                } catch (IOException e) {
                    return false;
                }
            }).count();
        }
    }

    private static boolean serverThreadAlive() {
        return Thread.getAllStackTraces().keySet().stream()
                .anyMatch(t -> t.getName().startsWith("sparkccl-fd-server") && t.isAlive());
    }

    @Test
    void aPeerWithTheSecretGetsItsOwnDescriptorOfTheSameFile() throws IOException {
        Path file = dir.resolve("window");
        byte[] content = "seventeen bytes!!".getBytes(StandardCharsets.US_ASCII);
        Files.write(file, content);
        long before = socketsAndTestFiles();
        int received;
        try (RandomAccessFile open = new RandomAccessFile(file.toFile(), "r");
             DescriptorServer server = DescriptorServer.start(descriptorOf(file), secret(1), "the test file")) {
            received = DescriptorServer.fetch(server.socketId(), secret(1), TIMEOUT);
            assertNotEquals(descriptorOf(file), received, "the peer's copy is a descriptor of its own");
            assertEquals(1, server.granted());
            assertEquals(List.of(), server.refusals());
        }
        // The file is closed by its opener and deleted: only the passed descriptor still holds it.
        Files.delete(file);
        assertArrayEquals(content, Files.readAllBytes(FDS.resolve(Integer.toString(received))));
        LibC.close(received);
        assertEquals(before, socketsAndTestFiles(), "a socket or descriptor was left open");
        assertFalse(serverThreadAlive(), "the server's thread ended with close");
    }

    @Test
    void refusesPeersWithoutTheSecretAndServesTheRightOneAfterwards() throws IOException {
        Path file = dir.resolve("window");
        Files.write(file, new byte[] {1, 2, 3});
        try (RandomAccessFile open = new RandomAccessFile(file.toFile(), "r");
             DescriptorServer server = DescriptorServer.start(descriptorOf(file), secret(1), "the test file")) {
            String wrong = assertThrows(IOException.class,
                    () -> DescriptorServer.fetch(server.socketId(), secret(2), TIMEOUT)).getMessage();
            assertTrue(wrong.contains("refused") && wrong.contains("secret"), wrong);
            sendRaw(server.socketId(), "SC".getBytes(StandardCharsets.US_ASCII));
            int received = DescriptorServer.fetch(server.socketId(), secret(1), TIMEOUT);
            LibC.close(received);
            assertEquals(1, server.granted());
            List<String> refusals = server.refusals();
            assertEquals(2, refusals.size(), refusals.toString());
            assertTrue(refusals.get(0).contains("another secret"), refusals.toString());
            assertTrue(refusals.get(1).contains("descriptor request from a peer: 2 bytes"), refusals.toString());
        }
    }

    @Test
    void nobodyServesAfterClose() throws IOException {
        Path file = dir.resolve("window");
        Files.write(file, new byte[] {1});
        byte[] socketId;
        try (RandomAccessFile open = new RandomAccessFile(file.toFile(), "r")) {
            DescriptorServer server = DescriptorServer.start(descriptorOf(file), secret(1), "the test file");
            socketId = server.socketId();
            server.close();
            assertFalse(serverThreadAlive());
        }
        String gone = assertThrows(IOException.class, () -> DescriptorServer.fetch(socketId, secret(1), TIMEOUT))
                .getMessage();
        assertTrue(gone.contains("nobody serves @sparkccl-fd-"), gone);
    }

    /** Connects, sends {@code bytes} and closes: a peer that is not a sparkccl rank. */
    private static void sendRaw(byte[] socketId, byte[] bytes) {
        int socket = LibC.socket(LibC.AF_UNIX, LibC.SOCK_STREAM | LibC.SOCK_CLOEXEC, 0);
        try {
            byte[] address = DescriptorServer.address(socketId);
            LibC.connect(socket, address, address.length);
            LibC.send(socket, bytes, bytes.length, LibC.MSG_NOSIGNAL);
            LibC.shutdown(socket, 1); // SHUT_WR: the server sees the end of the request
            LibC.recv(socket, new byte[1], 1, 0); // its refusal
        } finally {
            LibC.close(socket);
        }
    }
}
