package org.sparkccl.core.net;

import java.io.IOException;
import java.net.StandardSocketOptions;
import java.nio.channels.SocketChannel;
import jdk.net.ExtendedSocketOptions;

/**
 * TCP keepalive on every link of the socket transport. A peer host that vanishes without a reset
 * (powered off, cable pulled, its network dropped) leaves an idle connection open for hours; with
 * keepalive the kernel probes it after {@link #IDLE_S} quiet seconds, every {@link #INTERVAL_S}
 * seconds, and after {@link #PROBES} unanswered probes the link's next read or write fails: the
 * peer is then named as dead in about {@link #DETECTION_S} seconds, well within SPARKCCL_TIMEOUT_MS.
 * A live peer's kernel answers the probes even when its rank computes for hours between collectives.
 * Keepalive covers an idle connection; one with unacknowledged data waits for TCP's retransmissions,
 * and there the collective's own timeout ends the wait.
 *
 * <p>The timings are Linux socket options that Java offers in the {@code jdk.net} module. A Java runtime
 * trimmed without it (jlink) still gets keepalive, with the system's timings
 * ({@code net.ipv4.tcp_keepalive_time}, two hours by default): links work, and a vanished peer host is
 * then found by the collective's timeout. Seen with a jlinked runtime on the GPU machine, where every
 * cross-host link failed with ClassNotFoundException: jdk.net.ExtendedSocketOptions before this check.
 */
final class LinkKeepalive {
    static final int IDLE_S = 2;
    static final int INTERVAL_S = 1;
    static final int PROBES = 3;
    static final int DETECTION_S = IDLE_S + INTERVAL_S * PROBES;
    /** Whether this runtime has the jdk.net module, and so the keepalive timings. */
    static final boolean TIMINGS_AVAILABLE = ModuleLayer.boot().findModule("jdk.net").isPresent();

    private LinkKeepalive() {
    }

    /** Turns keepalive on for {@code channel}, with this class's timings where the runtime has them. */
    static void enable(SocketChannel channel) throws IOException {
        channel.setOption(StandardSocketOptions.SO_KEEPALIVE, true);
        if (TIMINGS_AVAILABLE) {
            Timings.set(channel);
        }
    }

    /** What a runtime without the jdk.net module cannot offer, in a class loaded only where it can. */
    private static final class Timings {
        static void set(SocketChannel channel) throws IOException {
            channel.setOption(ExtendedSocketOptions.TCP_KEEPIDLE, IDLE_S);
            channel.setOption(ExtendedSocketOptions.TCP_KEEPINTERVAL, INTERVAL_S);
            channel.setOption(ExtendedSocketOptions.TCP_KEEPCOUNT, PROBES);
        }
    }
}
