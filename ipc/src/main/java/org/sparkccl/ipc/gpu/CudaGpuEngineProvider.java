package org.sparkccl.ipc.gpu;

import java.util.function.BooleanSupplier;
import org.sparkccl.core.Bootstrap;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.engine.GpuEngineProvider;
import org.sparkccl.core.net.HostLayout;
import org.sparkccl.core.net.SocketListener;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.transport.RankInfo;
import org.sparkccl.ipc.cuda.GpuSupport;

/**
 * This module's GPU engine, registered in META-INF/services for core's chooser
 * ({@link org.sparkccl.core.engine.Engines}). Constructing it touches no native code: JCuda loads on
 * the first question to {@link GpuSupport}.
 */
public final class CudaGpuEngineProvider implements GpuEngineProvider {
    @Override
    public String unavailableReason() {
        return GpuSupport.unavailableReason();
    }

    @Override
    public int visibleDevices() {
        return GpuSupport.deviceCount();
    }

    @Override
    public Communicator oneHost(Bootstrap bootstrap, int deviceOrdinal, Params params, BooleanSupplier cancelled) {
        return GpuCommunicator.create(bootstrap, deviceOrdinal, params, cancelled);
    }

    @Override
    public Communicator acrossHosts(SocketListener listener, RankInfo[] all, int rank, HostLayout layout,
                                    int deviceOrdinal, Params params, BooleanSupplier cancelled) {
        return GpuTwoLevelCommunicator.create(listener, all, rank, layout, deviceOrdinal, params, cancelled);
    }
}
