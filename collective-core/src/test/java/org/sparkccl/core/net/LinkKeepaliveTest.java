package org.sparkccl.core.net;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import jdk.net.ExtendedSocketOptions;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** Both kinds of link turn TCP keepalive on, with LinkKeepalive's timings, on the socket they are given. */
class LinkKeepaliveTest {

    @AfterEach
    void nothingLeaked() {
        SocketRanks.assertNothingLeaked();
    }

    @Test
    void everyLinkProbesAnIdlePeerWithinSeconds() throws IOException {
        try (ServerSocketChannel server = ServerSocketChannel.open()) {
            server.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
            SocketChannel sending = SocketChannel.open(server.getLocalAddress());
            SocketChannel receiving = server.accept();
            assertEquals(false, sending.getOption(StandardSocketOptions.SO_KEEPALIVE), "off before the link");
            try (SendLink out = new SendLink(0, 1, sending, 2, 4096);
                 RecvLink in = new RecvLink(1, 0, receiving, 2, 4096)) {
                for (SocketLink link : new SocketLink[] {out, in}) {
                    assertEquals(true, link.channel.getOption(StandardSocketOptions.SO_KEEPALIVE));
                    assertEquals(LinkKeepalive.IDLE_S, link.channel.getOption(ExtendedSocketOptions.TCP_KEEPIDLE));
                    assertEquals(LinkKeepalive.INTERVAL_S, link.channel.getOption(ExtendedSocketOptions.TCP_KEEPINTERVAL));
                    assertEquals(LinkKeepalive.PROBES, link.channel.getOption(ExtendedSocketOptions.TCP_KEEPCOUNT));
                }
            }
        }
    }
}
