package org.sparkccl.core.engine;

import java.util.function.BooleanSupplier;
import org.sparkccl.core.Bootstrap;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.net.HostLayout;
import org.sparkccl.core.net.SocketListener;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.transport.RankInfo;

/**
 * The GPU engine, as {@link Engines} reaches it: registered with {@link java.util.ServiceLoader} by the
 * module that knows CUDA (ipc), so that this module, and a CPU-only user, never needs CUDA on the
 * class path. An implementation must load nothing native until {@link #unavailableReason()} is asked.
 */
public interface GpuEngineProvider {
    /** Null when GPUs can be used in this process, otherwise why not (no driver, no device, ...). */
    String unavailableReason();

    /** GPUs this process can use; 0 where {@link #unavailableReason()} is not null. */
    int visibleDevices();

    /**
     * The GPU engine over ranks of one host, on GPU {@code deviceOrdinal}: makes exactly one
     * {@code allGather} on {@code bootstrap}, and throws {@link org.sparkccl.core.net.SplitRound.OutOfReach}
     * where the round finds its ranks on several hosts.
     */
    Communicator oneHost(Bootstrap bootstrap, int deviceOrdinal, Params params, BooleanSupplier cancelled);

    /**
     * The two-level GPU engine over {@code layout} (every group the same size): the GPU engine inside each
     * group, TCP across over {@code listener} (started) through pinned host memory. {@code all} is the
     * bootstrap round's descriptions.
     */
    Communicator acrossHosts(SocketListener listener, RankInfo[] all, int rank, HostLayout layout, int deviceOrdinal,
                             Params params, BooleanSupplier cancelled);
}
