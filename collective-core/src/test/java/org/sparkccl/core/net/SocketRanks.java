package org.sparkccl.core.net;

import org.sparkccl.core.engine.Engines;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.function.IntFunction;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.memory.HostStagingBuffer;
import org.sparkccl.core.bootstrap.ThreadGroupBootstrap;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.transport.LocalMemoryTransport;

/**
 * Ranks as threads of this JVM, each pretending to be on the host {@code hostOf.apply(rank)}, built
 * through {@link Engines} with sockets on 127.0.0.1: ranks on one pretend host share LOCAL memory.
 */
final class SocketRanks {
    interface Body {
        void run(Communicator comm) throws Exception;
    }

    private SocketRanks() {
    }

    static Params params(String host, Map<String, String> more) {
        Map<String, String> settings = new java.util.HashMap<>(more);
        settings.put("SPARKCCL_HOST_ID", host);
        settings.put("SPARKCCL_SOCKET_ADDRESS", "127.0.0.1");
        settings.putIfAbsent("SPARKCCL_TIMEOUT_MS", "20000");
        return Params.defaults().withOverrides(settings);
    }

    /** Socket FIFOs, staging and LOCAL regions of this JVM are all released. */
    static void assertNothingLeaked() {
        assertEquals(0, SocketCommunicator.outstandingBytesInJvm(), "socket FIFOs left");
        assertEquals(0, HostStagingBuffer.outstandingBytes(), "staging left");
        assertEquals(0, LocalMemoryTransport.outstandingBytesInJvm(), "LOCAL regions left");
    }

    static void run(int n, IntFunction<String> hostOf, Map<String, String> settings, Body body) throws Exception {
        new ThreadGroupBootstrap.Group(n, Duration.ofSeconds(30)).run(bootstrap -> {
            Params params = params(hostOf.apply(bootstrap.rank()), settings);
            try (Communicator comm = Engines.host(bootstrap, r -> List.of(new LocalMemoryTransport()), params,
                    () -> false)) {
                body.run(comm);
            }
            return null;
        }, Duration.ofSeconds(60));
    }
}
