package org.sparkccl.core.shm;

import org.sparkccl.core.Communicator;
import org.sparkccl.core.bootstrap.ThreadGroupBootstrap;
import java.util.List;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.transport.LocalMemoryTransport;

/** Runs one body per rank, each on its own thread with its own communicator over LOCAL memory. */
final class ThreadRanks {
    interface Body {
        void run(Communicator comm) throws Exception;
    }

    static void run(int n, Params params, Body body) throws Exception {
        new ThreadGroupBootstrap.Group(n, java.time.Duration.ofSeconds(60)).run(bootstrap -> {
            try (Communicator comm = ShmCommunicator.create(bootstrap, List.of(new LocalMemoryTransport()), params)) {
                body.run(comm);
            }
            return null;
        }, java.time.Duration.ofSeconds(120));
    }
}
