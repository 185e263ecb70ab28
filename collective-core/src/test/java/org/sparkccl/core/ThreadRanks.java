package org.sparkccl.core;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.transport.LocalMemoryTransport;

/** Runs one body per rank, each on its own thread with its own communicator over LOCAL memory. */
final class ThreadRanks {
    interface Body {
        void run(Communicator comm) throws Exception;
    }

    static void run(int n, Params params, Body body) throws Exception {
        ThreadGroupBootstrap.Group group = new ThreadGroupBootstrap.Group(n, java.time.Duration.ofSeconds(60));
        ExecutorService pool = Executors.newFixedThreadPool(n);
        try {
            List<Future<?>> futures = new ArrayList<>();
            for (int r = 0; r < n; r++) {
                int rank = r;
                futures.add(pool.submit(() -> {
                    try (Communicator comm = HostCommunicator.create(group.member(rank),
                            List.of(new LocalMemoryTransport()), params)) {
                        body.run(comm);
                    }
                    return null;
                }));
            }
            for (Future<?> f : futures) {
                f.get(120, TimeUnit.SECONDS);
            }
        } finally {
            pool.shutdownNow();
        }
    }
}
