package org.sparkccl.core.net;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NetworkInterface;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.BooleanSupplier;
import org.sparkccl.core.CclException;
import org.sparkccl.core.CclTimeoutException;
import org.sparkccl.core.log.CclLog;
import org.sparkccl.core.log.Subsys;
import org.sparkccl.core.param.Params;

/**
 * This rank's listening socket for the socket transport. It is bound before the bootstrap round (its
 * address goes into the round), and once the round has given the communicator's secret, a thread
 * accepts connections, checks each one's hello ({@link SocketHandshake}) and keeps the good ones
 * until a ring {@link #take}s them: rings of one rank may be built in any order without anybody
 * waiting on a rank that is busy connecting elsewhere. Connections that fail the check are refused
 * with the reason and listed in {@link #refusals()}.
 */
public final class SocketListener implements AutoCloseable {
    /** The missing jdk.net is said once per JVM, not once per communicator (a Spark job builds many). */
    private static final AtomicBoolean WARNED_NO_JDK_NET = new AtomicBoolean();
    private static final int HELLO_TIMEOUT_MS = 5_000;
    private static final SecureRandom RANDOM = new SecureRandom();
    private final int rank;
    private final CclLog log;
    private final ServerSocketChannel server;
    private final InetSocketAddress address;
    private final Map<List<Integer>, SocketChannel> accepted = new HashMap<>();
    private final Set<ByteBuffer> seenNonces = new HashSet<>();
    private final List<String> refusals = Collections.synchronizedList(new ArrayList<>());
    private byte[] secret;
    private Thread acceptor;
    private boolean closed;

    private SocketListener(int rank, CclLog log, ServerSocketChannel server, InetSocketAddress address) {
        this.rank = rank;
        this.log = log;
        this.server = server;
        this.address = address;
    }

    /** Binds a free port on {@link Params#SOCKET_ADDRESS} (or this host's first non-loopback address). */
    public static SocketListener open(int rank, Params params, CclLog log) {
        InetAddress host = listenAddress(params.get(Params.SOCKET_ADDRESS));
        if (!LinkKeepalive.TIMINGS_AVAILABLE && !WARNED_NO_JDK_NET.getAndSet(true)) {
            log.warn(Subsys.NET, "this Java runtime has no jdk.net module: TCP keepalive runs with the system's timings"
                    + " (net.ipv4.tcp_keepalive_time), so a peer host that vanishes is found by the collective's timeout"
                    + " (SPARKCCL_TIMEOUT_MS) instead of in %d s; run on a Java runtime with jdk.net", LinkKeepalive.DETECTION_S);
        }
        try {
            ServerSocketChannel server = ServerSocketChannel.open();
            server.bind(new InetSocketAddress(host, 0), 128);
            InetSocketAddress bound = (InetSocketAddress) server.getLocalAddress();
            return new SocketListener(rank, log, server, new InetSocketAddress(host, bound.getPort()));
        } catch (IOException e) {
            throw new CclException("rank " + rank + ": cannot listen on " + host.getHostAddress() + " for the socket"
                    + " transport: " + e.getMessage() + "; set SPARKCCL_SOCKET_ADDRESS to an address of this host", e);
        }
    }

    /** Where peers connect to this rank. */
    public InetSocketAddress address() {
        return address;
    }

    /** Random bytes for the bootstrap round; every rank's go into the communicator's secret. */
    public static byte[] newSecretShare() {
        byte[] share = new byte[32];
        RANDOM.nextBytes(share);
        return share;
    }

    /** Starts accepting, now that the round gave every rank's share of the secret. */
    public synchronized void start(byte[][] secretShares) {
        if (acceptor != null) {
            throw new IllegalStateException("rank " + rank + ": listener started twice");
        }
        secret = SocketHandshake.communicatorSecret(secretShares);
        acceptor = new Thread(this::acceptLoop, "sparkccl-rank" + rank + "-accept");
        acceptor.setDaemon(true);
        acceptor.start();
    }

    byte[] secret() {
        return secret;
    }

    /** Why connections were turned away so far, one line each. */
    public List<String> refusals() {
        return List.copyOf(refusals);
    }

    /** Waits for connection {@code index} of ring {@code tag} from {@code fromRank}, checked, and hands it over. */
    SocketChannel take(int tag, int fromRank, int index, long deadlineNs, BooleanSupplier cancelled) {
        List<Integer> key = List.of(tag, fromRank, index);
        synchronized (this) {
            while (true) {
                SocketChannel ch = accepted.remove(key);
                if (ch != null) {
                    return ch;
                }
                if (closed) {
                    throw new CclException("rank " + rank + ": the socket listener closed while waiting for rank "
                            + fromRank + " to connect");
                }
                long left = deadlineNs - System.nanoTime();
                if (left <= 0) {
                    throw new CclTimeoutException("rank " + rank + ": rank " + fromRank + " did not connect to "
                            + address + " (ring " + tag + ", connection " + index + ") in time"
                            + (refusals.isEmpty() ? "" : "; refused meanwhile: " + refusals)
                            + "; is that rank alive, and can it reach this address? (SPARKCCL_SOCKET_ADDRESS picks it)");
                }
                if (cancelled.getAsBoolean()) {
                    throw new CclException("rank " + rank + ": cancelled while waiting for rank " + fromRank + " to connect");
                }
                try {
                    wait(Math.max(1, Math.min(TimeUnit.NANOSECONDS.toMillis(left), 50)));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new CclException("rank " + rank + ": interrupted while waiting for rank " + fromRank
                            + " to connect");
                }
            }
        }
    }

    /**
     * Connects to {@code to} as connection {@code index} of ring {@code tag} and proves the secret;
     * throws with the listening side's reason where it refuses.
     */
    static SocketChannel connect(InetSocketAddress to, byte[] secret, int tag, int fromRank, int toRank, int index,
                                 long deadlineNs) {
        byte[] nonce = new byte[SocketHandshake.NONCE_BYTES];
        RANDOM.nextBytes(nonce);
        SocketChannel ch = null;
        try {
            ch = SocketChannel.open();
            ch.setOption(StandardSocketOptions.TCP_NODELAY, true);
            ch.socket().connect(to, (int) Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadlineNs - System.nanoTime())));
            ch.socket().setSoTimeout((int) Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadlineNs - System.nanoTime())));
            DataOutputStream out = new DataOutputStream(ch.socket().getOutputStream());
            SocketHandshake.Hello.signed(secret, tag, fromRank, toRank, index, nonce).write(out);
            String refused = SocketHandshake.readAnswer(new DataInputStream(ch.socket().getInputStream()), secret, nonce);
            if (refused != null) {
                throw new CclException("rank " + fromRank + ": rank " + toRank + " at " + to + " refused connection "
                        + index + " of ring " + tag + ": " + refused);
            }
            ch.socket().setSoTimeout(0);
            return ch;
        } catch (IOException e) {
            closeQuietly(ch);
            throw new CclException("rank " + fromRank + ": cannot connect to rank " + toRank + " at " + to + ": " + e
                    + "; is that rank alive, and is its address reachable from here?", e);
        } catch (RuntimeException e) {
            closeQuietly(ch);
            throw e;
        }
    }

    private void acceptLoop() {
        while (true) {
            SocketChannel ch;
            try {
                ch = server.accept();
            } catch (ClosedChannelException e) {
                return;
            } catch (IOException e) {
                log.warn(Subsys.NET, "accepting a socket-transport connection failed: %s", e);
                synchronized (this) {
                    if (closed) {
                        return;
                    }
                }
                continue;
            }
            admit(ch);
        }
    }

    /** Checks one incoming connection's hello; keeps it, or refuses it with the reason. */
    private void admit(SocketChannel ch) {
        String from = String.valueOf(remote(ch));
        try {
            ch.setOption(StandardSocketOptions.TCP_NODELAY, true);
            ch.socket().setSoTimeout(HELLO_TIMEOUT_MS);
            DataOutputStream out = new DataOutputStream(ch.socket().getOutputStream());
            try {
                SocketHandshake.Hello hello = SocketHandshake.Hello.read(new DataInputStream(ch.socket().getInputStream()));
                from = hello + " (" + from + ")";
                if (hello.toRank != rank) {
                    throw new SocketHandshake.Refused("this is rank " + rank + ", not rank " + hello.toRank
                            + ": a stale address from an earlier communicator?");
                }
                if (!hello.signedWith(secret)) {
                    throw new SocketHandshake.Refused("wrong secret: the hello is not signed with this communicator's"
                            + " secret (a rank of another communicator or job, or not sparkccl)");
                }
                synchronized (this) {
                    if (!seenNonces.add(ByteBuffer.wrap(hello.nonce))) {
                        throw new SocketHandshake.Refused("a replayed hello (its nonce was used before)");
                    }
                    List<Integer> key = List.of(hello.tag, hello.fromRank, hello.index);
                    if (closed || accepted.containsKey(key)) {
                        throw new SocketHandshake.Refused(closed ? "this rank's listener is closed"
                                : "a second connection with the same ring, rank and index");
                    }
                    SocketHandshake.writeOk(out, secret, hello.nonce);
                    ch.socket().setSoTimeout(0);
                    accepted.put(key, ch);
                    notifyAll();
                }
            } catch (SocketHandshake.Refused e) {
                refusals.add(from + ": " + e.getMessage());
                log.warn(Subsys.NET, "refused %s: %s", from, e.getMessage());
                SocketHandshake.writeRefusal(out, "rank " + rank + " refused " + from + ": " + e.getMessage());
                drainAndClose(ch);
            }
        } catch (IOException e) {
            refusals.add(from + ": " + e);
            log.warn(Subsys.NET, "dropped %s: %s", from, e);
            closeQuietly(ch);
        }
    }

    /**
     * Closes after the refused side has read the reason: closing with its unread bytes still queued
     * would reset the connection, and the reason with it.
     */
    private static void drainAndClose(SocketChannel ch) {
        try {
            ch.shutdownOutput();
            ch.socket().setSoTimeout(200);
            java.io.InputStream in = ch.socket().getInputStream();
            byte[] sink = new byte[4096];
            for (int i = 0; i < 64 && in.read(sink) >= 0; i++) {
                // discard what the refused side sent
            }
        } catch (IOException ignored) {
            // closing anyway
        }
        closeQuietly(ch);
    }

    private static Object remote(SocketChannel ch) {
        try {
            return ch.getRemoteAddress();
        } catch (IOException e) {
            return "?";
        }
    }

    static InetAddress listenAddress(String setting) {
        try {
            if (!setting.isEmpty()) {
                return InetAddress.getByName(setting);
            }
            for (NetworkInterface nif : Collections.list(NetworkInterface.getNetworkInterfaces())) {
                if (!nif.isUp() || nif.isLoopback()) {
                    continue;
                }
                for (InetAddress a : Collections.list(nif.getInetAddresses())) {
                    if (a instanceof Inet4Address && !a.isLinkLocalAddress()) {
                        return a;
                    }
                }
            }
            return InetAddress.getLoopbackAddress();
        } catch (IOException e) {
            throw new CclException("cannot find an address to listen on for the socket transport ('" + setting + "'): "
                    + e.getMessage() + "; set SPARKCCL_SOCKET_ADDRESS to an address of this host", e);
        }
    }

    static void closeQuietly(java.nio.channels.Channel ch) {
        if (ch != null) {
            try {
                ch.close();
            } catch (IOException ignored) {
                // closing anyway
            }
        }
    }

    @Override
    public void close() {
        List<SocketChannel> leftovers;
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
            leftovers = new ArrayList<>(accepted.values());
            accepted.clear();
            notifyAll();
        }
        closeQuietly(server);
        for (SocketChannel ch : leftovers) {
            closeQuietly(ch);
        }
        if (acceptor != null) {
            try {
                acceptor.join(HELLO_TIMEOUT_MS + 1000L);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
