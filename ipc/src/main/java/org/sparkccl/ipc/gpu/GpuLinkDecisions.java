package org.sparkccl.ipc.gpu;

import java.util.ArrayList;
import java.util.List;
import org.sparkccl.core.CclException;
import org.sparkccl.core.log.CclLog;
import org.sparkccl.core.log.Subsys;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.proto.Protocol;
import org.sparkccl.core.topo.Ring;
import org.sparkccl.ipc.cuda.CudaDevice;
import org.sparkccl.ipc.cuda.GpuSupport;

/**
 * What {@link GpuConnection} decides about the links between the ranks' GPUs: what this rank's GPU
 * reaches (before the bootstrap round), and, from what every rank sent (after it), how many ranks share
 * a GPU, which link the cost model prices and whether LL128 may run. Each decision after the round is a
 * function of the round alone, so every rank comes to the same one without another exchange.
 */
final class GpuLinkDecisions {
    private GpuLinkDecisions() {
    }

    /** What this rank tells its peers about its GPU: its identity and the GPUs it reaches peer-to-peer. */
    static GpuRankInfo describeDevice(CudaDevice device, boolean p2pDisabled) {
        List<byte[]> reach = new ArrayList<>();
        int nvLinks = 0;
        if (!p2pDisabled) {
            for (int i = 0; i < GpuSupport.deviceCount(); i++) {
                CudaDevice other = CudaDevice.get(i);
                if (other != device && device.canAccessPeer(other) && other.canAccessPeer(device)
                        && reach.size() < GpuRankInfo.MAX_PEERS) {
                    nvLinks |= device.nvLinkTo(other) ? 1 << reach.size() : 0;
                    reach.add(other.uuid());
                }
            }
        }
        return new GpuRankInfo(device.ordinal(), device.uuid(), device.pciBusId(), p2pDisabled, reach, nvLinks);
    }

    /** The largest number of ranks on one GPU (by UUID), the same on every rank. */
    static int mostRanksOnOneGpu(GpuRankInfo[] gpus) {
        int size = gpus.length;
        int most = 1;
        for (int r = 0; r < size; r++) {
            int on = 0;
            for (int q = 0; q < size; q++) {
                if (gpus[q].sameGpu(gpus[r])) {
                    on++;
                }
            }
            most = Math.max(most, on);
        }
        return most;
    }

    /**
     * Ranks of one process that share a GPU each launch a persistent kernel on a stream of their own;
     * streams share CUDA's hardware work queues (CUDA_DEVICE_MAX_CONNECTIONS, 8 by default), and a
     * kernel queued behind a peer's kernel that waits for it never starts: the collective times out.
     */
    static void warnAboutSharedQueues(int sharing, CudaDevice device, CclLog log) {
        String env = System.getenv("CUDA_DEVICE_MAX_CONNECTIONS");
        int queues = 8;
        try {
            queues = env == null ? 8 : Integer.parseInt(env.trim());
        } catch (NumberFormatException e) {
            // CUDA ignores a bad value too.
        }
        if (sharing > queues / 2) {
            log.warn(Subsys.INIT, "%d ranks of this process share %s and CUDA_DEVICE_MAX_CONNECTIONS is %d: their "
                    + "kernels may queue behind each other and time out; set CUDA_DEVICE_MAX_CONNECTIONS=32 in the "
                    + "environment of this process", sharing, device.where(), queues);
        }
    }

    /** ONE_GPU where every hop of every channel's ring stays on one GPU, else NVLINK (the cost model's link). */
    static GpuCostModel.Link ringLink(List<Ring> rings, GpuRankInfo[] gpus) {
        for (Ring ring : rings) {
            for (int r = 0; r < gpus.length; r++) {
                if (!gpus[r].sameGpu(gpus[ring.next(r)])) {
                    return GpuCostModel.Link.NVLINK;
                }
            }
        }
        return GpuCostModel.Link.ONE_GPU;
    }

    /**
     * LL128 connections (33 MB of device memory at 64 channels) are made only where LL128 may run: forced,
     * or on auto where SPARKCCL_LL128_THRESHOLD is set or the cost model gives it sizes at this many ranks.
     * Known before the round, so the connections go into the window that is offered in it.
     */
    static boolean ll128Wanted(Params params, int size) {
        String proto = params.get(Params.PROTO).trim();
        if (size < 2 || params.get(Params.P2P_DISABLE)) {
            return false;
        }
        if (!"auto".equalsIgnoreCase(proto)) {
            return Protocol.fromName(proto) == Protocol.LL128;
        }
        return params.get(Params.LL128_THRESHOLD) >= 0 || GpuCostModel.ll128EverWins(size);
    }

    /**
     * True when every hop of every channel's ring may run LL128 (GpuRankInfo.ll128Link), the same on every rank. Where
     * some hop may not and SPARKCCL_PROTO=LL128 pins it, every rank fails here naming that hop.
     */
    static boolean refuseForcedLl128Unless(List<Ring> rings, GpuRankInfo[] gpus, int rank, Params params) {
        for (Ring ring : rings) {
            for (int r = 0; r < gpus.length; r++) {
                int q = ring.next(r);
                if (!GpuRankInfo.ll128Link(gpus[r], gpus[q])) {
                    if (Protocol.LL128.displayName().equalsIgnoreCase(params.get(Params.PROTO).trim())) {
                        throw new CclException("rank " + rank + ": SPARKCCL_PROTO=LL128, but rank " + r + " ("
                                + gpus[r].pciBusId + ") sends to rank " + q + " (" + gpus[q].pciBusId + ") "
                                + (GpuRankInfo.p2pLink(gpus[r], gpus[q]) ? "peer-to-peer over PCIe" : "through host memory")
                                + ", where a 128-byte store is not delivered whole: LL128 runs only where every hop is "
                                + "NVLink or within one GPU; set SPARKCCL_PROTO to auto, LL or Simple");
                    }
                    return false;
                }
            }
        }
        return true;
    }
}
