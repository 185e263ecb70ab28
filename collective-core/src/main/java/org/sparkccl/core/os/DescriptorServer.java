package org.sparkccl.core.os;

import com.sun.jna.LastErrorException;
import com.sun.jna.Memory;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.sparkccl.core.wire.WireFormat;
import org.sparkccl.core.wire.WireFormatException;

/**
 * Hands one file descriptor of this process to other processes of the same host that present a
 * secret: a Unix-domain socket in Linux's abstract namespace (a random name, no file, gone with the
 * process), one daemon thread that accepts, reads each peer's request and answers with the descriptor
 * (SCM_RIGHTS: the kernel installs a copy of it in the peer) or a refusal. The name and the secret reach
 * the peers some other way (a communicator's connect blob); anyone on the host can see the name in
 * /proc/net/unix and connect, so the secret is what keeps others out. {@link #fetch} is the peer's side.
 *
 * <p>Wire: the peer sends the 16-byte secret as a sealed {@link WireFormat} message (magic {@code "SCFD"});
 * the server answers one byte, {@code K}
 * with the descriptor attached or {@code R} (refused), and closes the connection. Peers are served one
 * at a time; one that sends nothing is dropped after {@link #PEER_TIMEOUT}.
 *
 * <p>The served descriptor stays the caller's: close the server first, then the descriptor.
 */
public final class DescriptorServer implements AutoCloseable {
    public static final int SOCKET_ID_BYTES = 16;
    public static final int SECRET_BYTES = 16;
    /** How long the server waits for one peer's request before dropping it. */
    static final Duration PEER_TIMEOUT = Duration.ofSeconds(5);
    /** Version 1 was the magic and the secret, unsealed. */
    private static final WireFormat REQUEST = WireFormat.sealed("descriptor request", 0x53434644, 2); // "SCFD"
    private static final int REQUEST_BYTES = WireFormat.ENVELOPE_BYTES + SECRET_BYTES;
    private static final byte GRANTED = 'K';
    private static final byte REFUSED = 'R';
    /** How often the accept thread looks whether the server was closed (close also wakes it at once). */
    private static final Duration ACCEPT_POLL = Duration.ofMillis(200);
    // struct msghdr (56 bytes), one struct iovec (16), a control buffer of CMSG_SPACE(sizeof(int)) (24)
    // and the one payload byte, laid out in one native block (Linux, 64-bit).
    private static final int IOV_OFFSET = 56;
    private static final int CONTROL_OFFSET = 72;
    private static final int CONTROL_BYTES = 24;
    private static final int CMSG_LEN_ONE_FD = 20;
    private static final int PAYLOAD_OFFSET = 96;
    private static final int MESSAGE_BLOCK_BYTES = 97;
    private static final SecureRandom RANDOM = new SecureRandom();

    private final int served;
    private final byte[] secret;
    private final byte[] socketId = new byte[SOCKET_ID_BYTES];
    private final String what;
    private final int listening;
    private final Thread acceptor;
    private final List<String> refusals = new ArrayList<>();
    private final AtomicInteger granted = new AtomicInteger();
    private volatile boolean closed;

    private DescriptorServer(int served, byte[] secret, String what) throws IOException {
        if (secret.length != SECRET_BYTES) {
            throw new IllegalArgumentException("a descriptor server's secret has " + SECRET_BYTES + " bytes, not "
                    + secret.length);
        }
        this.served = served;
        this.secret = secret.clone();
        this.what = what;
        RANDOM.nextBytes(socketId);
        requireLibC();
        this.listening = openSocket();
        try {
            byte[] address = address(socketId);
            LibC.bind(listening, address, address.length);
            LibC.listen(listening, 128);
            setTimeouts(listening, ACCEPT_POLL);
        } catch (LastErrorException e) {
            LibC.close(listening);
            throw new IOException("cannot listen on " + name(socketId) + " to hand out " + what + ": " + errno(e), e);
        }
        this.acceptor = new Thread(this::acceptLoop, "sparkccl-fd-server " + what);
        acceptor.setDaemon(true);
        acceptor.start();
    }

    /**
     * Starts serving {@code descriptor} (which stays open and the caller's) to peers that present
     * {@code secret}; {@code what} (e.g. "rank 2's GPU window") goes into errors and the thread's name.
     */
    public static DescriptorServer start(int descriptor, byte[] secret, String what) throws IOException {
        return new DescriptorServer(descriptor, secret, what);
    }

    /** The random part of the socket's name, for the peers. */
    public byte[] socketId() {
        return socketId.clone();
    }

    /** The socket's name, {@code @sparkccl-fd-} and the socket id in hex (for logs). */
    public String name() {
        return name(socketId);
    }

    /** Peers that presented the right secret (each was then sent the descriptor). */
    public int granted() {
        return granted.get();
    }

    /** Why each refused peer was refused, oldest first. */
    public synchronized List<String> refusals() {
        return List.copyOf(refusals);
    }

    /**
     * Asks the server named {@code socketId} for its descriptor, presenting {@code secret}, and returns
     * this process's copy of it (close-on-exec; the caller closes it). Fails with the reason: nobody
     * listens there (the process exited or closed the server), refused, no answer within {@code timeout}
     * ({@link Duration#ZERO}: no bound).
     */
    public static int fetch(byte[] socketId, byte[] secret, Duration timeout) throws IOException {
        if (socketId.length != SOCKET_ID_BYTES || secret.length != SECRET_BYTES) {
            throw new IllegalArgumentException("socket id and secret have " + SOCKET_ID_BYTES + " and " + SECRET_BYTES
                    + " bytes, not " + socketId.length + " and " + secret.length);
        }
        requireLibC();
        String name = name(socketId);
        int socket = openSocket();
        try {
            setTimeouts(socket, timeout);
            byte[] address = address(socketId);
            try {
                LibC.connect(socket, address, address.length);
            } catch (LastErrorException e) {
                throw new IOException(e.getErrorCode() == LibC.ECONNREFUSED ? "nobody serves " + name
                        + " (its process exited or closed it)" : "cannot connect to " + name + ": " + errno(e), e);
            }
            if (!sendAll(socket, REQUEST.seal(secret))) {
                throw new IOException(name + " closed the connection before reading the request");
            }
            return receiveDescriptor(socket, name, timeout);
        } catch (LastErrorException e) {
            throw new IOException(e.getErrorCode() == LibC.EAGAIN ? "no answer from " + name + " within "
                    + timeout.toMillis() + " ms" : "talking to " + name + " failed: " + errno(e), e);
        } finally {
            closeQuietly(socket);
        }
    }

    private static int receiveDescriptor(int socket, String name, Duration timeout) throws IOException {
        try (Memory m = new Memory(MESSAGE_BLOCK_BYTES)) {
            m.clear();
            long received;
            do {
                prepareMessage(m);
                try {
                    received = LibC.recvmsg(socket, m, LibC.MSG_CMSG_CLOEXEC);
                } catch (LastErrorException e) {
                    if (e.getErrorCode() == LibC.EINTR) {
                        received = -1;
                        continue;
                    }
                    throw e;
                }
            } while (received < 0);
            int fd = receivedDescriptor(m);
            byte answer = m.getByte(PAYLOAD_OFFSET);
            if (received == 1 && answer == GRANTED && fd >= 0) {
                return fd;
            }
            if (fd >= 0) {
                closeQuietly(fd);
            }
            if (received == 0) {
                throw new IOException(name + " closed the connection without an answer");
            }
            if (answer == REFUSED) {
                throw new IOException(name + " refused the request: the secret presented is not the one it serves "
                        + "(a connect blob of another communicator, or a stale one)");
            }
            if ((m.getInt(48) & LibC.MSG_CTRUNC) != 0) {
                throw new IOException(name + " sent more descriptors than asked for: refused");
            }
            throw new IOException(name + " answered " + answer + (fd < 0 ? " without a descriptor" : "")
                    + ": it is not a sparkccl descriptor server");
        }
    }

    /** Points the msghdr at its iovec (the payload byte) and its control buffer. */
    private static void prepareMessage(Memory m) {
        long base = com.sun.jna.Pointer.nativeValue(m);
        m.setLong(16, base + IOV_OFFSET);        // msg_iov
        m.setLong(24, 1);                        // msg_iovlen
        m.setLong(32, base + CONTROL_OFFSET);    // msg_control
        m.setLong(40, CONTROL_BYTES);            // msg_controllen
        m.setInt(48, 0);                         // msg_flags
        m.setLong(IOV_OFFSET, base + PAYLOAD_OFFSET);
        m.setLong(IOV_OFFSET + 8, 1);
    }

    /** The descriptor in a received control message, or -1. */
    private static int receivedDescriptor(Memory m) {
        long controlLength = m.getLong(40);
        if (controlLength < CMSG_LEN_ONE_FD) {
            return -1;
        }
        long length = m.getLong(CONTROL_OFFSET);
        int level = m.getInt(CONTROL_OFFSET + 8);
        int type = m.getInt(CONTROL_OFFSET + 12);
        if (level != LibC.SOL_SOCKET || type != LibC.SCM_RIGHTS || length < CMSG_LEN_ONE_FD) {
            return -1;
        }
        if (length > CMSG_LEN_ONE_FD) { // more than one descriptor: keep none of them
            for (int at = CONTROL_OFFSET + 16; at + 4 <= CONTROL_OFFSET + length; at += 4) {
                closeQuietly(m.getInt(at));
            }
            return -1;
        }
        return m.getInt(CONTROL_OFFSET + 16);
    }

    private void acceptLoop() {
        while (!closed) {
            int peer;
            try {
                peer = LibC.accept4(listening, null, null, LibC.SOCK_CLOEXEC);
            } catch (LastErrorException e) {
                // EAGAIN: the poll interval passed; EINTR; after close (shutdown) the loop ends. Anything
                // else (no descriptors left, say) is tried again a little later rather than in a tight loop.
                if (e.getErrorCode() != LibC.EAGAIN && e.getErrorCode() != LibC.EINTR && !closed) {
                    pause();
                }
                continue;
            }
            try {
                serve(peer);
            } catch (LastErrorException e) {
                refuse("a peer's connection failed: " + errno(e));
            } finally {
                closeQuietly(peer);
            }
        }
    }

    private void serve(int peer) {
        setTimeouts(peer, PEER_TIMEOUT);
        byte[] request = new byte[REQUEST_BYTES];
        int got = receiveAll(peer, request);
        byte[] presented = new byte[SECRET_BYTES];
        try {
            REQUEST.open(Arrays.copyOf(request, got), SECRET_BYTES, "a peer").get(presented);
        } catch (WireFormatException e) {
            refuse(peer, e.getMessage());
            return;
        }
        if (!MessageDigest.isEqual(presented, secret)) {
            refuse(peer, "a peer presented another secret");
            return;
        }
        granted.incrementAndGet(); // counted first: the peer may have its answer before sendmsg returns here
        try (Memory m = new Memory(MESSAGE_BLOCK_BYTES)) {
            m.clear();
            prepareMessage(m);
            m.setLong(CONTROL_OFFSET, CMSG_LEN_ONE_FD);
            m.setInt(CONTROL_OFFSET + 8, LibC.SOL_SOCKET);
            m.setInt(CONTROL_OFFSET + 12, LibC.SCM_RIGHTS);
            m.setInt(CONTROL_OFFSET + 16, served);
            m.setByte(PAYLOAD_OFFSET, GRANTED);
            LibC.sendmsg(peer, m, LibC.MSG_NOSIGNAL);
        }
    }

    /** Records why, and tells the peer (which may be gone already). */
    private void refuse(int peer, String why) {
        refuse(why);
        try {
            LibC.send(peer, new byte[] {REFUSED}, 1, LibC.MSG_NOSIGNAL);
        } catch (LastErrorException e) {
            // The peer left: it has its answer.
        }
    }

    private synchronized void refuse(String why) {
        if (!closed) {
            refusals.add(why);
        }
    }

    private static void pause() {
        try {
            Thread.sleep(10);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Stops serving: peers that ask from now on find nobody. Does not close the served descriptor. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        try {
            LibC.shutdown(listening, LibC.SHUT_RDWR); // wakes a waiting accept at once
        } catch (LastErrorException e) {
            // Not connected is fine: the poll interval ends the wait anyway.
        }
        try {
            acceptor.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt(); // the thread ends within the poll interval; the socket goes now
        }
        closeQuietly(listening);
    }

    @Override
    public String toString() {
        return "descriptor server " + name(socketId) + " for " + what;
    }

    // ---- Socket plumbing. ---------------------------------------------------------------------------

    private static void requireLibC() throws IOException {
        if (LibC.unavailableReason() != null) {
            throw new IOException("cannot pass file descriptors between processes: " + LibC.unavailableReason());
        }
    }

    private static int openSocket() throws IOException {
        try {
            return LibC.socket(LibC.AF_UNIX, LibC.SOCK_STREAM | LibC.SOCK_CLOEXEC, 0);
        } catch (LastErrorException e) {
            throw new IOException("cannot create a Unix-domain socket: " + errno(e), e);
        }
    }

    /** The socket's name, for messages: in the abstract namespace, so it shows as {@code @name}. */
    static String name(byte[] socketId) {
        return "@sparkccl-fd-" + HexFormat.of().formatHex(socketId);
    }

    /** struct sockaddr_un of an abstract name: the family, a 0 byte, the name (no terminating 0). */
    static byte[] address(byte[] socketId) {
        byte[] name = name(socketId).substring(1).getBytes(StandardCharsets.US_ASCII);
        ByteBuffer b = ByteBuffer.allocate(2 + 1 + name.length).order(ByteOrder.nativeOrder());
        b.putShort((short) LibC.AF_UNIX).put((byte) 0).put(name);
        return b.array();
    }

    /** Bounds each blocking call on {@code socket}; {@link Duration#ZERO} waits as long as it takes. */
    private static void setTimeouts(int socket, Duration timeout) {
        long micros = timeout.isZero() ? 0 : Math.max(1000, timeout.toNanos() / 1000);
        long[] timeval = {micros / 1_000_000, micros % 1_000_000};
        LibC.setsockopt(socket, LibC.SOL_SOCKET, LibC.SO_RCVTIMEO, timeval, 16);
        LibC.setsockopt(socket, LibC.SOL_SOCKET, LibC.SO_SNDTIMEO, timeval, 16);
    }

    /** Fills {@code buffer} from the socket; the number of bytes read (fewer at end of stream). */
    private static int receiveAll(int socket, byte[] buffer) {
        int got = 0;
        while (got < buffer.length) {
            byte[] rest = new byte[buffer.length - got];
            long n;
            try {
                n = LibC.recv(socket, rest, rest.length, 0);
            } catch (LastErrorException e) {
                if (e.getErrorCode() == LibC.EINTR) {
                    continue;
                }
                if (e.getErrorCode() == LibC.EAGAIN) {
                    return got; // the peer sent nothing more within the timeout
                }
                throw e;
            }
            if (n == 0) {
                return got;
            }
            System.arraycopy(rest, 0, buffer, got, (int) n);
            got += (int) n;
        }
        return got;
    }

    /** Sends all of {@code bytes}; false when the peer closed first. */
    private static boolean sendAll(int socket, byte[] bytes) {
        int sent = 0;
        while (sent < bytes.length) {
            byte[] rest = Arrays.copyOfRange(bytes, sent, bytes.length);
            try {
                long n = LibC.send(socket, rest, rest.length, LibC.MSG_NOSIGNAL);
                if (n <= 0) {
                    return false;
                }
                sent += (int) n;
            } catch (LastErrorException e) {
                if (e.getErrorCode() != LibC.EINTR) {
                    throw e;
                }
            }
        }
        return true;
    }

    private static void closeQuietly(int fd) {
        try {
            LibC.close(fd);
        } catch (LastErrorException e) {
            // Already gone: nothing to release.
        }
    }

    private static String errno(LastErrorException e) {
        return "errno " + e.getErrorCode();
    }
}
