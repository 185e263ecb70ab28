package org.sparkccl.core.bootstrap;

import org.sparkccl.core.Bootstrap;
import org.sparkccl.core.CclException;
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import org.sparkccl.core.wire.WireFormat;
import org.sparkccl.core.wire.WireFormatException;

/**
 * A {@link Bootstrap} over TCP for tools and tests that run without Spark: rank 0 listens on the
 * rendezvous address (127.0.0.1 unless told otherwise), the other ranks connect to it, and every
 * {@link #allGather} is a star through rank 0. The hello, the welcome and every part of a call
 * travel as sealed {@link WireFormat} messages. {@link #barrier} is an allGather of nothing.
 *
 * <p>Safety rails, because a bootstrap that hangs or mixes up jobs is miserable to debug:
 * <ul>
 *   <li>every connection starts with a hello carrying a job token; a connection from another job (or
 *       from something that is not sparkccl at all) is refused and the rendezvous keeps waiting;</li>
 *   <li>every call carries its kind and sequence number; ranks whose calls differ all fail, with both
 *       calls in the message;</li>
 *   <li>every socket read is bounded by the timeout; a peer that disconnects makes every rank fail
 *       with an error naming it.</li>
 * </ul>
 * After a failure the bootstrap is unusable: every later call repeats the first error.
 *
 * <p>Not thread safe: one thread per rank calls it ({@link #close} may come from any thread).
 */
public final class TcpBootstrap implements Bootstrap {
    /**
     * Bytes 'S','C','B','T' first in every message, so that strangers are told apart at once.
     * Version 2: every message sealed (body length and CRC32C).
     */
    static final WireFormat FORMAT = WireFormat.sealed("bootstrap message", 0x53434254, 2);
    static final int MAX_FRAME_BYTES = 1 << 30;
    /** Rank and size (4 bytes each) and the job token (writeUTF: at most 2 + 65535 bytes). */
    private static final int MAX_HELLO_BYTES = 8 + 2 + 65535;
    private static final byte STATUS_OK = 0;
    private static final byte STATUS_ERROR = 1;
    /** A connection that says nothing this long after connecting is dropped, so it cannot stall the rendezvous. */
    private static final long HELLO_TIMEOUT_MS = 5_000;
    /**
     * Ranks other than 0 wait this much longer than the timeout for rank 0's answer: rank 0 applies
     * the timeout itself and then sends the reason, which names the culprit; that beats a bare timeout.
     */
    private static final long ANSWER_GRACE_MS = 3_000;

    private final int rank;
    private final int size;
    private final long timeoutMs;
    /** Rank 0: the connection of rank r at index r (index 0 unused). Other ranks: their connection to rank 0 at index 0. */
    private final Connection[] connections;
    private int calls;
    private CclException failure;
    private volatile boolean closed;

    private TcpBootstrap(int rank, int size, long timeoutMs, Connection[] connections) {
        this.rank = rank;
        this.size = size;
        this.timeoutMs = timeoutMs;
        this.connections = connections;
    }

    /** {@code host:port} for this machine's loopback: where tests and single-host tools meet. */
    public static InetSocketAddress loopback(int port) {
        return new InetSocketAddress("127.0.0.1", port);
    }

    /** As {@link #connect(InetSocketAddress, int, int, Duration, String)} with an empty job token. */
    public static TcpBootstrap connect(InetSocketAddress rendezvous, int rank, int size, Duration timeout) {
        return connect(rendezvous, rank, size, timeout, "");
    }

    /**
     * Joins the group: rank 0 listens on {@code rendezvous} and waits for every other rank; the
     * others connect to it, retrying while rank 0 is not listening yet. Returns once all {@code size}
     * ranks have joined, or throws when that takes longer than {@code timeout}. Every rank of one job
     * passes the same {@code jobToken}; connections with another token are refused.
     */
    public static TcpBootstrap connect(InetSocketAddress rendezvous, int rank, int size, Duration timeout,
                                       String jobToken) {
        checkGroup(rank, size);
        Objects.requireNonNull(rendezvous, "rendezvous");
        if (rank == 0) {
            if (rendezvous.getPort() == 0) {
                throw new IllegalArgumentException("rank 0 needs a fixed rendezvous port so that the other ranks can "
                        + "find it; port 0 (any free port) only works through TcpBootstrap.listen(...), whose "
                        + "localAddress() tells the port");
            }
            try (Rendezvous r = listen(rendezvous, size, timeout, jobToken)) {
                return r.awaitRanks();
            }
        }
        return join(rendezvous, rank, size, timeout, jobToken);
    }

    /**
     * Rank 0's side in two steps, for callers that let the system pick the port (tests): bind now,
     * hand {@link Rendezvous#localAddress()} to the other ranks, then {@link Rendezvous#awaitRanks()}.
     */
    public static Rendezvous listen(InetSocketAddress address, int size, Duration timeout, String jobToken) {
        checkGroup(0, size);
        return new Rendezvous(address, size, timeout.toMillis(), jobToken);
    }

    @Override
    public int rank() {
        return rank;
    }

    @Override
    public int size() {
        return size;
    }

    @Override
    public byte[][] allGather(byte[] mine) {
        return call(BootstrapCall.ALL_GATHER, Objects.requireNonNull(mine, "mine"));
    }

    @Override
    public void barrier() {
        call(BootstrapCall.BARRIER, new byte[0]);
    }

    @Override
    public void close() {
        closed = true;
        for (Connection c : connections) {
            if (c != null) {
                c.close();
            }
        }
    }

    private byte[][] call(byte kind, byte[] mine) {
        if (closed) {
            throw new IllegalStateException(who() + ": the bootstrap is closed");
        }
        if (failure != null) {
            throw new CclException(who() + ": the bootstrap failed earlier and cannot be used again: "
                    + failure.getMessage(), failure);
        }
        int sequence = ++calls;
        try {
            return rank == 0 ? gatherAsRoot(kind, sequence, mine) : gatherAsLeaf(kind, sequence, mine);
        } catch (CclException e) {
            failure = e;
            throw e;
        }
    }

    private byte[][] gatherAsRoot(byte kind, int sequence, byte[] mine) {
        byte[][] all = new byte[size][];
        all[0] = mine.clone();
        long deadline = System.currentTimeMillis() + timeoutMs;
        for (int r = 1; r < size; r++) {
            Connection c = connections[r];
            try {
                DataInputStream in = c.inputWithin(deadline);
                byte theirKind = in.readByte();
                int theirSequence = in.readInt();
                byte[] data = FORMAT.read(in, MAX_FRAME_BYTES, "rank " + r);
                if (theirKind != kind || theirSequence != sequence) {
                    throw failAll(who() + ": bootstrap calls differ across ranks: rank 0 is in " + BootstrapCall.describe(kind, sequence)
                            + " but rank " + r + " is in " + BootstrapCall.describe(theirKind, theirSequence)
                            + "; every rank must make the same bootstrap calls in the same order");
                }
                all[r] = data;
            } catch (SocketTimeoutException e) {
                throw failAll(who() + ": rank " + r + " did not reach " + BootstrapCall.describe(kind, sequence) + " within "
                        + timeoutMs + " ms; it may be stuck, slow, or making different calls");
            } catch (WireFormatException e) {
                throw failAll(who() + ": " + e.getMessage());
            } catch (IOException e) {
                throw failAll(lostRank(r, kind, sequence, e));
            }
        }
        for (int r = 1; r < size; r++) {
            try {
                DataOutputStream out = connections[r].output();
                out.writeByte(STATUS_OK);
                out.writeInt(sequence);
                out.writeInt(size);
                for (byte[] part : all) {
                    FORMAT.write(out, part);
                }
                out.flush();
            } catch (IOException e) {
                throw failAll(lostRank(r, kind, sequence, e));
            }
        }
        return all;
    }

    private byte[][] gatherAsLeaf(byte kind, int sequence, byte[] mine) {
        Connection root = connections[0];
        try {
            DataOutputStream out = root.output();
            out.writeByte(kind);
            out.writeInt(sequence);
            FORMAT.write(out, mine);
            out.flush();
            DataInputStream in = root.inputWithin(System.currentTimeMillis() + timeoutMs + ANSWER_GRACE_MS);
            byte status = in.readByte();
            if (status == STATUS_ERROR) {
                throw new CclException(who() + ": " + BootstrapCall.describe(kind, sequence) + " failed: " + in.readUTF());
            }
            if (status != STATUS_OK) {
                throw new CclException(who() + ": damaged answer from rank 0 (status " + status + ")");
            }
            int theirSequence = in.readInt();
            int n = in.readInt();
            if (theirSequence != sequence || n != size) {
                throw new CclException(who() + ": rank 0 answered call #" + theirSequence + " with " + n
                        + " parts while this rank is in " + BootstrapCall.describe(kind, sequence));
            }
            byte[][] all = new byte[size][];
            for (int r = 0; r < size; r++) {
                all[r] = FORMAT.read(in, MAX_FRAME_BYTES, "rank 0");
            }
            return all;
        } catch (WireFormatException e) {
            throw new CclException(who() + ": " + e.getMessage(), e);
        } catch (SocketTimeoutException e) {
            throw new CclException(who() + ": no answer from rank 0 to " + BootstrapCall.describe(kind, sequence) + " within "
                    + (timeoutMs + ANSWER_GRACE_MS) + " ms; rank 0 may be stuck");
        } catch (IOException e) {
            throw new CclException(lostRank(0, kind, sequence, e), e);
        }
    }

    /** Rank 0 only: tells every other rank why the group failed (best effort), and returns the error to throw. */
    private CclException failAll(String message) {
        for (int r = 1; r < size; r++) {
            connections[r].sendErrorQuietly(message);
        }
        return new CclException(message);
    }

    private String lostRank(int peer, byte kind, int sequence, IOException e) {
        String what = peer == 0 ? "rank 0 (the rendezvous)" : "rank " + peer;
        if (closed) {
            return who() + ": the bootstrap was closed during " + BootstrapCall.describe(kind, sequence);
        }
        return who() + ": " + what + " closed its bootstrap connection during " + BootstrapCall.describe(kind, sequence)
                + " (did the process die?)" + (e instanceof EOFException ? "" : ": " + e);
    }

    private String who() {
        return "TcpBootstrap rank " + rank + " of " + size;
    }

    private static void checkGroup(int rank, int size) {
        if (size < 1 || rank < 0 || rank >= size) {
            throw new IllegalArgumentException("rank " + rank + " of " + size + " is not a valid place in a group");
        }
    }

    private static boolean tokensEqual(String a, String b) {
        return MessageDigest.isEqual(a.getBytes(StandardCharsets.UTF_8), b.getBytes(StandardCharsets.UTF_8));
    }

    /** Rank 0's listening socket, before every rank has joined. */
    public static final class Rendezvous implements AutoCloseable {
        private final int size;
        private final long timeoutMs;
        private final String jobToken;
        private final ServerSocket server;

        private Rendezvous(InetSocketAddress address, int size, long timeoutMs, String jobToken) {
            this.size = size;
            this.timeoutMs = timeoutMs;
            this.jobToken = Objects.requireNonNull(jobToken, "jobToken");
            try {
                ServerSocket s = new ServerSocket();
                s.setReuseAddress(true);
                try {
                    s.bind(address, size + 16);
                } catch (IOException e) {
                    s.close();
                    throw e;
                }
                this.server = s;
            } catch (IOException e) {
                throw new CclException("rank 0 cannot listen for the bootstrap on " + address + ": " + e.getMessage()
                        + "; is another job using that port? Pick another rendezvous port", e);
            }
        }

        /** Where the other ranks connect (the real port when 0 was asked for). */
        public InetSocketAddress localAddress() {
            return (InetSocketAddress) server.getLocalSocketAddress();
        }

        /** Waits until ranks 1..size-1 have joined, then returns rank 0's bootstrap. Closes the listening socket. */
        public TcpBootstrap awaitRanks() {
            long deadline = System.currentTimeMillis() + timeoutMs;
            Connection[] joined = new Connection[size];
            List<String> refused = new ArrayList<>();
            int missing = size - 1;
            try {
                while (missing > 0) {
                    long left = deadline - System.currentTimeMillis();
                    if (left <= 0) {
                        throw new SocketTimeoutException();
                    }
                    server.setSoTimeout((int) Math.min(left, Integer.MAX_VALUE));
                    Socket socket = server.accept();
                    Connection c = new Connection(socket);
                    String why = admit(c, joined, Math.min(deadline, System.currentTimeMillis() + HELLO_TIMEOUT_MS));
                    if (why != null) {
                        refused.add(why);
                        c.sendErrorQuietly("refused by rank 0 at " + localAddress() + ": " + why);
                        c.close();
                    } else {
                        missing--;
                    }
                }
                for (int r = 1; r < size; r++) {
                    DataOutputStream out = joined[r].output();
                    out.writeByte(STATUS_OK);
                    FORMAT.write(out, new byte[0]);
                    out.flush();
                }
                return new TcpBootstrap(0, size, timeoutMs, joined);
            } catch (IOException e) {
                List<Integer> absent = new ArrayList<>();
                for (int r = 1; r < size; r++) {
                    if (joined[r] == null) {
                        absent.add(r);
                    }
                }
                String message = "TcpBootstrap rank 0 of " + size + ": "
                        + (e instanceof SocketTimeoutException
                            ? "ranks " + absent + " did not join at " + localAddress() + " within " + timeoutMs + " ms"
                            : "the rendezvous at " + localAddress() + " failed: " + e)
                        + (refused.isEmpty() ? "" : "; refused connections: " + refused);
                for (Connection c : joined) {
                    if (c != null) {
                        c.sendErrorQuietly(message);
                        c.close();
                    }
                }
                throw new CclException(message, e);
            } finally {
                close();
            }
        }

        /** Null when the connection is a rank of this job that had not joined yet; otherwise why it is refused. */
        private String admit(Connection c, Connection[] joined, long helloDeadline) {
            String from = String.valueOf(c.socket.getRemoteSocketAddress());
            try {
                byte[] hello = FORMAT.read(c.inputWithin(helloDeadline), MAX_HELLO_BYTES, from);
                DataInputStream in = new DataInputStream(new ByteArrayInputStream(hello));
                int theirRank = in.readInt();
                int theirSize = in.readInt();
                String token = in.readUTF();
                if (in.available() != 0) {
                    return "a connection from " + from + " sent a hello with " + in.available() + " bytes too many";
                }
                if (!tokensEqual(token, jobToken)) {
                    return "a connection from " + from + " (rank " + theirRank + ") carries another job's token";
                }
                if (theirSize != size) {
                    return "rank " + theirRank + " from " + from + " thinks the group has " + theirSize
                            + " ranks, rank 0 " + size;
                }
                if (theirRank < 1 || theirRank >= size) {
                    return "rank " + theirRank + " from " + from + " is not a rank of a group of " + size;
                }
                if (joined[theirRank] != null) {
                    return "rank " + theirRank + " joined twice (second time from " + from + ")";
                }
                joined[theirRank] = c;
                return null;
            } catch (WireFormatException e) {
                return e.getMessage();
            } catch (IOException e) {
                return "a connection from " + from + " sent no valid hello: " + e;
            }
        }

        @Override
        public void close() {
            try {
                server.close();
            } catch (IOException e) {
                // Nothing useful to do: the socket is gone either way.
            }
        }
    }

    /** A rank other than 0 joins: connect (retrying while rank 0 is not listening), hello, wait for the welcome. */
    private static TcpBootstrap join(InetSocketAddress rendezvous, int rank, int size, Duration timeout, String jobToken) {
        long timeoutMs = timeout.toMillis();
        long deadline = System.currentTimeMillis() + timeoutMs;
        String who = "TcpBootstrap rank " + rank + " of " + size;
        Socket socket = connectWithRetry(rendezvous, deadline, who, timeoutMs);
        Connection c = new Connection(socket);
        try {
            ByteArrayOutputStream hello = new ByteArrayOutputStream();
            DataOutputStream body = new DataOutputStream(hello);
            body.writeInt(rank);
            body.writeInt(size);
            body.writeUTF(Objects.requireNonNull(jobToken, "jobToken"));
            DataOutputStream out = c.output();
            FORMAT.write(out, hello.toByteArray());
            out.flush();
            // Rank 0 welcomes everyone once the last rank has joined, which its own timeout bounds.
            DataInputStream in = c.inputWithin(deadline + ANSWER_GRACE_MS);
            byte status = in.readByte();
            if (status == STATUS_ERROR) {
                throw new CclException(who + ": " + in.readUTF());
            }
            if (status != STATUS_OK) {
                throw new IOException("the rendezvous answered with something that is not a sparkccl bootstrap");
            }
            FORMAT.read(in, 0, "rank 0 at " + rendezvous);
            Connection[] connections = {c};
            return new TcpBootstrap(rank, size, timeoutMs, connections);
        } catch (SocketTimeoutException e) {
            c.close();
            throw new CclException(who + ": connected to " + rendezvous + " but the group did not form within "
                    + timeoutMs + " ms; are all " + size + " ranks running?", e);
        } catch (WireFormatException e) {
            c.close();
            throw new CclException(who + ": " + e.getMessage(), e);
        } catch (IOException e) {
            c.close();
            throw new CclException(who + ": rank 0 at " + rendezvous + " dropped the connection before the group "
                    + "formed (" + e + "); rank 0 may have failed or refused this rank", e);
        } catch (CclException e) {
            c.close();
            throw e;
        }
    }

    private static Socket connectWithRetry(InetSocketAddress rendezvous, long deadline, String who, long timeoutMs) {
        long pauseMs = 10;
        IOException last = null;
        while (true) {
            long left = deadline - System.currentTimeMillis();
            if (left <= 0) {
                throw new CclException(who + ": could not reach rank 0 at " + rendezvous + " within " + timeoutMs
                        + " ms (" + last + "); is rank 0 running, and is that its address?", last);
            }
            Socket socket = new Socket();
            try {
                socket.connect(rendezvous, (int) Math.min(left, Integer.MAX_VALUE));
                return socket;
            } catch (ConnectException | SocketTimeoutException e) {
                // Rank 0 is not listening yet: normal while the group starts.
                last = e;
                closeQuietly(socket);
            } catch (IOException e) {
                closeQuietly(socket);
                throw new CclException(who + ": cannot connect to rank 0 at " + rendezvous + ": " + e, e);
            }
            try {
                Thread.sleep(Math.min(pauseMs, Math.max(1, deadline - System.currentTimeMillis())));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new CclException(who + ": interrupted while connecting to rank 0 at " + rendezvous, e);
            }
            pauseMs = Math.min(pauseMs * 2, 200);
        }
    }

    private static void closeQuietly(Socket socket) {
        try {
            socket.close();
        } catch (IOException e) {
            // Already broken; nothing to release beyond the descriptor, which close() frees regardless.
        }
    }

    /** One TCP connection with buffered streams; reads are bounded by a deadline. */
    private static final class Connection {
        final Socket socket;
        private DataInputStream in;
        private DataOutputStream out;

        Connection(Socket socket) {
            this.socket = socket;
            try {
                socket.setTcpNoDelay(true);
            } catch (IOException e) {
                // Only latency suffers.
            }
        }

        DataInputStream inputWithin(long deadlineMillis) throws IOException {
            long left = deadlineMillis - System.currentTimeMillis();
            if (left <= 0) {
                throw new SocketTimeoutException("deadline passed");
            }
            socket.setSoTimeout((int) Math.min(left, Integer.MAX_VALUE));
            if (in == null) {
                in = new DataInputStream(new BufferedInputStream(socket.getInputStream()));
            }
            return in;
        }

        DataOutputStream output() throws IOException {
            if (out == null) {
                out = new DataOutputStream(new BufferedOutputStream(socket.getOutputStream()));
            }
            return out;
        }

        /** Error frames are small, so this write does not block on a peer that stopped reading. */
        void sendErrorQuietly(String message) {
            try {
                DataOutputStream o = output();
                o.writeByte(STATUS_ERROR);
                o.writeUTF(message.length() > 8000 ? message.substring(0, 8000) : message);
                o.flush();
            } catch (IOException | RuntimeException e) {
                // The peer is gone or going; it will see the connection close instead.
            }
        }

        void close() {
            closeQuietly(socket);
        }
    }
}
