package org.sparkccl.ipc.gpu;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.concurrent.locks.LockSupport;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import jcuda.Pointer;
import jcuda.driver.CUfunction;
import jcuda.driver.JCudaDriver;
import org.agrona.concurrent.UnsafeBuffer;
import org.sparkccl.core.Bootstrap;
import org.sparkccl.core.CclException;
import org.sparkccl.core.CclTimeoutException;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.DataType;
import org.sparkccl.core.jdk.JdkAccess;
import org.sparkccl.core.MemoryKind;
import org.sparkccl.core.PeerFailedException;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.StagingBuffer;
import org.sparkccl.core.log.CclLog;
import org.sparkccl.core.log.Subsys;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.wait.SpinYieldPark;
import org.sparkccl.core.proto.ChannelLayout;
import org.sparkccl.core.proto.CollectiveHeader;
import org.sparkccl.core.proto.CollectiveHeader.Kind;
import org.sparkccl.core.proto.Protocol;
import org.sparkccl.core.proto.SegmentLayout;
import org.sparkccl.core.topo.Ring;
import org.sparkccl.core.transport.HostIdentity;
import org.sparkccl.core.transport.RankInfo;
import org.sparkccl.ipc.cuda.Cuda;
import org.sparkccl.ipc.cuda.CudaDevice;
import org.sparkccl.ipc.cuda.CudaException;
import org.sparkccl.ipc.cuda.CudaStream;
import org.sparkccl.ipc.cuda.DeviceBuffer;
import org.sparkccl.ipc.cuda.KernelModule;
import org.sparkccl.ipc.cuda.PinnedHostBuffer;
import org.sparkccl.core.shm.ShmTransport;

/**
 * Collectives between GPUs of one machine. Each rank runs one persistent kernel per collective
 * (ring_kernels.cu) that does the whole ring, one block per channel, writing into its successor's
 * receive window: device memory mapped through CUDA IPC (or a plain pointer for ranks of this
 * process) where the two GPUs reach each other peer-to-peer, else a /dev/shm window both GPUs map
 * (host-staged). Built with one bootstrap round. Addresses are device pointers of this rank's GPU.
 * The {@link Communicator} calls return when the collective is complete on this rank; the calls that
 * take a {@link CudaStream} are stream-ordered, as NCCL's: they queue the collective on that stream and
 * return at once (see {@link #allReduce(long, long, long, DataType, ReduceOp, CudaStream)}).
 *
 * <p>Not thread safe: one thread per rank, as with NCCL. Ranks of one process must not free device
 * memory ({@code cuMemFree} may wait for the whole GPU) while another rank on the same GPU is inside a
 * collective.
 */
public final class GpuCommunicator implements Communicator {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    static final String ENTRY_DEVICE = "gpu.device";
    static final String ENTRY_P2P = "gpu.p2p";
    static final String ENTRY_HOST = "gpu.host";
    static final String ENTRY_HOST_SHM = "gpu.host.shm";
    static final String ENTRY_ABORT_RECORD = "gpu.abort";
    /** Default Simple buffer per channel on GPUs when SPARKCCL_BUFFSIZE is not set (NCCL's default). */
    static final long DEFAULT_GPU_BUFFSIZE = 4L << 20;
    /**
     * Measured on 2 x H200 (NVLink), 256 MB busbw: 231 GB/s at 16 channels, 254 at 24, 288 at 32; in one
     * later run 261 / 298 / 303 at 32 / 48 / 64 (128 MB: 234 / 290 / 295).
     */
    static final int DEFAULT_P2P_CHANNELS = 64;
    /** Measured on 2 x H200 (host-staged): 128 MB busbw 28.1 GB/s at 4 channels, 29.6 at 8, 33.3 at 16. */
    static final int DEFAULT_STAGED_CHANNELS = 16;
    /**
     * At most this many blocks of collective kernels per GPU, whatever the number of ranks on it:
     * the kernels of ranks that share a GPU wait on each other, so all their blocks must be resident
     * at once (one 512-thread block fills an SM's registers), and the rest of the GPU stays free for
     * the user's own kernels.
     */
    static final int MAX_BLOCKS_PER_GPU = 64;
    /** How long a failed connect waits for a dying peer to be gone, to remove what it left in /dev/shm. */
    private static final long CONNECT_FAILURE_GRACE_NS = TimeUnit.SECONDS.toNanos(2);
    private static final long PEER_CHECK_INTERVAL_NS = TimeUnit.MILLISECONDS.toNanos(50);
    /** Parks, once a wait has yielded for SpinYieldPark's 20 ms, last this long (a GPU call ends on its own). */
    private static final long PARK_NS = TimeUnit.MICROSECONDS.toNanos(20);

    private final int rank;
    private final int size;
    private final CudaDevice device;
    private final CclLog log;
    private final Params params;
    private final BooleanSupplier cancelled;
    private final String where;
    private final List<AutoCloseable> resources = new ArrayList<>();
    private final List<DeviceBuffer> stagingPool = new ArrayList<>();
    private CudaStream stream;
    private KernelModule module;
    private GpuTuner tuner;
    private RankInfo[] infos;
    /** Each channel's ring (empty for a single rank). */
    private List<Ring> rings = List.of();
    private GpuWindow.Host hostWindowToUnlink;
    /** Host windows live in /dev/shm; what a dead peer left there is removed through this. */
    private ShmTransport shm;
    /** Why a rank failed, readable by its peers (null without /dev/shm): see {@link GpuAbortRecords}. */
    private GpuAbortRecords abortRecords;
    private DeviceBuffer devComm;
    private DeviceBuffer channelState;
    private DeviceBuffer ringOrders;
    private DeviceBuffer barrierBuffer;
    private PinnedHostBuffer status;
    private UnsafeBuffer statusView;
    // The kernel's parameter block in native memory: JCuda passes a direct buffer by its address,
    // where a Java array would be pinned or copied on every launch.
    private final ByteBuffer argsView = ByteBuffer.allocateDirect(DevCommLayout.ARGS_BYTES).order(ByteOrder.LITTLE_ENDIAN);
    private final Pointer kernelParams = Pointer.to(Pointer.to(argsView));
    private ResidentKernel resident;
    private StreamCalls streamCalls;
    /** Started by the first stream-ordered call. */
    private GpuPeerWatcher watcher;
    /** Set from connect's round until the first launch: see {@link InProcessConnectGate}. */
    private String gateId;
    /** Ranks of this process on this GPU launch together (null when no other rank here shares it). */
    private SharedGpuLaunchGate launchGate;
    /** Some process holds several ranks of this communicator on one GPU (the same answer on every rank). */
    private boolean someProcessSharesAGpu;
    private int ranksInProcess;
    private long timeoutNs;
    /** How waitForKernel idles (the host engine's strategy, with fixed 20 us parks). */
    private SpinYieldPark idle;
    private int sequence;
    private long lastLaunchNanos;
    private long lastKernelNanos;
    private String brokenBy;
    private boolean closed;
    private String links = "";

    private GpuCommunicator(int rank, int size, CudaDevice device, Params params, BooleanSupplier cancelled) {
        this.cancelled = cancelled;
        this.rank = rank;
        this.size = size;
        this.device = device;
        this.params = params;
        this.log = new CclLog(rank, params);
        this.where = device.where() + ", rank " + rank;
    }

    /** Builds the communicator: one {@code allGather} on the bootstrap, every rank together. */
    static GpuCommunicator create(Bootstrap bootstrap, int deviceOrdinal, Params params, BooleanSupplier cancelled) {
        CudaDevice device = CudaDevice.get(deviceOrdinal);
        GpuCommunicator comm = new GpuCommunicator(bootstrap.rank(), bootstrap.size(), device, params, cancelled);
        try {
            comm.connect(bootstrap);
            return comm;
        } catch (RuntimeException e) {
            // A peer that died while connecting may have left a window in /dev/shm. Its sockets close
            // before its process is gone (a CUDA process takes a while to exit), so give it a moment.
            comm.cleanUpAfterDeadPeers(CONNECT_FAILURE_GRACE_NS);
            comm.close();
            throw e;
        } finally {
            if (comm.gateId != null) {
                InProcessConnectGate.connected(comm.gateId, comm.ranksInProcess);
            }
        }
    }

    private <T extends AutoCloseable> T own(T resource) {
        resources.add(resource);
        return resource;
    }

    private void connect(Bootstrap bootstrap) {
        for (String line : params.describeSet()) {
            log.info(Subsys.INIT, "%s", line);
        }
        device.makeCurrent();
        stream = own(new CudaStream(device, where));
        module = KernelModule.forDevice(device);
        module.loadAll(GpuPlan.allKernelNames());
        timeoutNs = TimeUnit.MILLISECONDS.toNanos(params.get(Params.TIMEOUT_MS));
        idle = new SpinYieldPark(params.get(Params.SPINS_BEFORE_YIELD), SpinYieldPark.DEFAULT_YIELD_NANOS, PARK_NS, PARK_NS);

        long simpleBytes = params.isSet(Params.BUFFSIZE) ? params.get(Params.BUFFSIZE) : DEFAULT_GPU_BUFFSIZE;
        ChannelLayout layout = new ChannelLayout(params.get(Params.LL_BUFFSIZE), simpleBytes);
        int requested = params.get(Params.NCHANNELS);
        int p2pChannels = Math.min(DevCommLayout.MAX_CHANNELS, requested > 0 ? requested : DEFAULT_P2P_CHANNELS);
        int stagedChannels = Math.min(DevCommLayout.MAX_CHANNELS, requested > 0 ? requested : DEFAULT_STAGED_CHANNELS);
        SegmentLayout deviceLayout = new SegmentLayout(layout, p2pChannels);
        // One-shot inboxes follow the channels in the P2P window; used only if every pair of GPUs turns
        // out to be peer-to-peer (known after the round), so they are made wherever that may be.
        long oneShotCapacity = size >= 2 && size <= GpuOneShotLayout.MAX_RANKS ? GpuTuner.oneShotCapacity(params, size) : 0;
        GpuOneShotLayout oneShotLayout = new GpuOneShotLayout(size, oneShotCapacity);
        long oneShotOffset = (deviceLayout.totalBytes() + 4095) / 4096 * 4096;
        long deviceWindowBytes = oneShotCapacity > 0 ? oneShotOffset + oneShotLayout.totalBytes() : deviceLayout.totalBytes();
        // LL128 connections follow, likewise made wherever they may be used (known after the round).
        GpuLl128Layout ll128Layout = ll128Wanted() ? new GpuLl128Layout(p2pChannels, params.get(Params.LL128_BUFFSIZE)) : null;
        long ll128Offset = (deviceWindowBytes + 4095) / 4096 * 4096;
        if (ll128Layout != null) {
            deviceWindowBytes = ll128Offset + ll128Layout.totalBytes();
        }
        SegmentLayout hostLayout = new SegmentLayout(layout, stagedChannels);
        boolean p2pDisabled = params.get(Params.P2P_DISABLE);

        // Before the round: both receive windows, and what a peer needs to open them.
        String owner = "rank " + rank;
        String hostId = HostIdentity.hostId(params); // SPARKCCL_HOST_ID or spark.sparkccl.hostId, else the machine's
        byte[] hostHash = GpuConnectBlob.hostHash(hostId);
        GpuWindow.Device deviceWindow = null;
        if (!p2pDisabled && size > 1) {
            deviceWindow = own(GpuWindow.Device.create(device, deviceWindowBytes, stream, owner, params, log));
        }
        shm = own(new ShmTransport(params, log));
        GpuWindow.Host hostWindow = null;
        if (size > 1 && shm.unavailableReason() == null) {
            hostWindow = own(new GpuWindow.Host(shm, device, hostLayout.totalBytes(), owner));
        }
        RankInfo me = new RankInfo(rank, size, hostId, HostIdentity.pid(), HostIdentity.shmDevice(), Map.of()).withEntry(ENTRY_DEVICE, describeDevice(p2pDisabled).encode());
        GpuRingFacts.Observed seen = null;
        if (size > 1) {
            seen = GpuRingFacts.observe(device, p2pDisabled, params, log);
            me = seen.addTo(me, params);
        }
        if (deviceWindow != null) {
            me = me.withEntry(ENTRY_P2P, deviceWindow.connectBlob(rank, size, hostHash, device));
        }
        if (hostWindow != null) {
            me = me.withEntry(ENTRY_HOST, hostWindow.connectBlob(rank, size, hostHash, device))
                    .withEntry(ENTRY_HOST_SHM, hostWindow.shmBlob());
        }
        if (size > 1 && shm.unavailableReason() == null) {
            abortRecords = own(new GpuAbortRecords(shm, rank));
            me = me.withEntry(ENTRY_ABORT_RECORD, abortRecords.connectBlob());
        }

        byte[][] all = bootstrap.allGather(me.encode());

        infos = new RankInfo[size];
        GpuRankInfo[] gpus = new GpuRankInfo[size];
        for (int r = 0; r < size; r++) {
            infos[r] = RankInfo.decode(all[r], r, size);
            gpus[r] = GpuRankInfo.decode(infos[r].entry(ENTRY_DEVICE), r);
        }
        for (int r = 0; r < size; r++) {
            ranksInProcess += infos[r].sameProcess(infos[rank]) ? 1 : 0;
        }
        if (ranksInProcess > 1) {
            gateId = communicatorId(all);
        }
        for (int r = 0; r < size; r++) {
            if (!infos[r].sameHost(infos[rank])) {
                throw new CclException("rank " + rank + ": rank " + r + " runs on another host (" + infos[r].hostId()
                        + "): GpuCommunicators.create connects GPUs of one machine only; build the communicator with"
                        + " core's Engines.gpu (Spark does) to span hosts");
            }
        }
        int sharingGpu = 0;
        for (int r = 0; r < size; r++) {
            sharingGpu += infos[r].sameProcess(infos[rank]) && gpus[r].sameGpu(gpus[rank]) ? 1 : 0;
            for (int q = r + 1; q < size; q++) {
                someProcessSharesAGpu |= infos[q].sameProcess(infos[r]) && gpus[q].sameGpu(gpus[r]);
            }
        }
        warnAboutSharedQueues(sharingGpu);
        if (abortRecords != null) {
            byte[][] recordBlobs = new byte[size][];
            for (int r = 0; r < size; r++) {
                recordBlobs[r] = infos[r].entry(ENTRY_ABORT_RECORD);
            }
            abortRecords.open(shm, infos, recordBlobs);
        }
        if (sharingGpu > 1) {
            launchGate = own(new SharedGpuLaunchGate(gateId, device.ordinal(), sharingGpu));
        }
        streamCalls = own(new StreamCalls(device, where));
        status = own(PinnedHostBuffer.allocate(device, DevCommLayout.STATUS_BYTES, owner));
        statusView = new UnsafeBuffer(status.address(), DevCommLayout.STATUS_BYTES);
        barrierBuffer = own(DeviceBuffer.allocate(device, 256, owner));
        if (size == 1) {
            tuner = new GpuTuner(params, layout, 1);
            log.info(Subsys.INIT, "GPU communicator of 1 rank on %s", device.where());
            return;
        }

        // After the round: every rank computes the same rings and decides every link alike, then opens the
        // windows of its successors (one per distinct successor over the channels' rings).
        GpuRingFacts.warnLinkHealth(seen.topology(), gpus, rank, log);
        List<Ring> planned = GpuRingFacts.rings(infos, gpus, rank, p2pChannels, params, log);
        boolean anyStaged = false;
        boolean allPairsP2p = true;
        for (int r = 0; r < size; r++) {
            for (Ring ring : planned) {
                anyStaged |= !GpuRankInfo.p2pLink(gpus[r], gpus[ring.next(r)]);
            }
            for (int q = 0; q < size; q++) {
                allPairsP2p &= q == r || GpuRankInfo.p2pLink(gpus[r], gpus[q]);
            }
        }
        boolean oneShot = oneShotCapacity > 0 && allPairsP2p;
        int channels = anyStaged ? Math.min(p2pChannels, stagedChannels) : p2pChannels;
        channels = Math.min(channels, Math.max(1, MAX_BLOCKS_PER_GPU / mostRanksOnOneGpu(gpus)));
        rings = List.copyOf(planned.subList(0, channels));
        boolean ll128 = refuseForcedLl128Unless(gpus) && ll128Layout != null;
        tuner = new GpuTuner(params, layout, channels, oneShot ? oneShotCapacity : 0, ll128 ? ll128Layout : null,
                ringLink(gpus), size);

        // Per channel: the window this rank receives in (the predecessor's transport decides) and the
        // successor's window it sends into.
        long[] recvWindows = new long[channels];
        long[] sendWindows = new long[channels];
        Map<Integer, PeerWindow> successors = new TreeMap<>();
        boolean receivesP2p = false;
        boolean receivesStaged = false;
        for (int c = 0; c < channels; c++) {
            int prev = rings.get(c).prev(rank);
            int next = rings.get(c).next(rank);
            boolean inP2p = GpuRankInfo.p2pLink(gpus[prev], gpus[rank]);
            GpuWindow mine = inP2p ? deviceWindow : hostWindow;
            if (mine == null) {
                throw new CclException("rank " + rank + ": rank " + prev + " must send through "
                        + (inP2p ? "P2P" : "host shared memory") + " but this rank could not create that window ("
                        + (inP2p ? "P2P disabled" : shm.unavailableReason()) + ")");
            }
            receivesP2p |= inP2p;
            receivesStaged |= !inP2p;
            recvWindows[c] = mine.kernelAddress();
            PeerWindow out = successors.get(next);
            if (out == null) {
                out = own(openSuccessor(next, GpuRankInfo.p2pLink(gpus[rank], gpus[next]), hostHash, shm));
                successors.put(next, out);
            }
            sendWindows[c] = out.kernelAddress();
        }
        // One-shot: every peer's window too (every pair is P2P: a successor's window is the same one).
        long[] oneShotInboxes = new long[size];
        if (oneShot) {
            for (int q = 0; q < size; q++) {
                if (q == rank) {
                    oneShotInboxes[q] = deviceWindow.kernelAddress() + oneShotOffset;
                    continue;
                }
                PeerWindow w = successors.containsKey(q) ? successors.get(q) : own(openP2p(q, hostHash, oneShotOffset
                        + oneShotLayout.inboxOffset(1, rank)));
                oneShotInboxes[q] = w.kernelAddress() + oneShotOffset;
            }
        }
        // A window no predecessor uses goes now; the others stay until close.
        for (GpuWindow unused : new GpuWindow[] {receivesP2p ? null : deviceWindow, receivesStaged ? null : hostWindow}) {
            if (unused != null) {
                resources.remove(unused);
                unused.close();
            }
        }
        if (receivesStaged) {
            hostWindowToUnlink = hostWindow;
        }

        writeDevComm(deviceLayout, recvWindows, sendWindows, channels,
                oneShot ? oneShotLayout.inboxBytes() : 0, oneShotInboxes);
        if (ll128) {
            writeLl128Connections(ll128Layout, recvWindows, sendWindows, ll128Offset, channels);
        }
        // Auto: only where this process holds one rank. With several ranks (threads) per process, 4 ranks
        // on 2 GPUs showed calls of ~2 ms (the resident kernel's idle time) now and then: something there
        // waits for the GPU while another rank's resident kernel idles; not understood yet.
        String residentSetting = params.get(Params.RESIDENT).trim();
        if (oneShot && (residentSetting.equals("1") || residentSetting.equalsIgnoreCase("auto") && ranksInProcess == 1)) {
            resident = own(new ResidentKernel(device, module, devComm.address(), GpuTuner.THREADS, where));
        }
        StringBuilder via = new StringBuilder();
        for (Map.Entry<Integer, PeerWindow> e : successors.entrySet()) {
            via.append(via.length() == 0 ? "" : ", ").append("to ").append(e.getKey()).append(" via ").append(e.getValue().via());
        }
        links = "ring " + rings.get(0).prev(rank) + " -> " + rank + " -> " + rings.get(0).next(rank)
                + (successors.size() > 1 ? " on channel 0 (" + successors.size() + " successors over the rings)" : "")
                + ": receives via "
                + (receivesP2p && receivesStaged ? "P2P and SHM/staged" : receivesP2p ? "P2P" : "SHM/staged")
                + ", sends " + via + ", " + tuner.describe()
                + (resident != null ? ", resident one-shot kernel up to " + ResidentKernel.MAX_BYTES + " bytes" : "");
        log.info(Subsys.INIT, "GPU communicator on %s: %s", device.where(), links);
    }

    /** The same on every rank of this communicator, different for every other (the round carries random secrets). */
    private static String communicatorId(byte[][] all) {
        try {
            java.security.MessageDigest sha = java.security.MessageDigest.getInstance("SHA-256");
            for (byte[] a : all) {
                sha.update(a);
            }
            return java.util.HexFormat.of().formatHex(sha.digest());
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is missing from this JRE", e);
        }
    }

    /** The largest number of ranks on one GPU (by UUID), the same on every rank. */
    private int mostRanksOnOneGpu(GpuRankInfo[] gpus) {
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
    private void warnAboutSharedQueues(int sharing) {
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

    private GpuRankInfo describeDevice(boolean p2pDisabled) {
        List<byte[]> reach = new ArrayList<>();
        int nvLinks = 0;
        if (!p2pDisabled) {
            for (int i = 0; i < org.sparkccl.ipc.cuda.GpuSupport.deviceCount(); i++) {
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

    /** ONE_GPU where every hop of every channel's ring stays on one GPU, else NVLINK (the cost model's link). */
    private GpuCostModel.Link ringLink(GpuRankInfo[] gpus) {
        for (Ring ring : rings) {
            for (int r = 0; r < size; r++) {
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
     */
    private boolean ll128Wanted() {
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
    private boolean refuseForcedLl128Unless(GpuRankInfo[] gpus) {
        for (Ring ring : rings) {
            for (int r = 0; r < size; r++) {
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

    private PeerWindow openSuccessor(int next, boolean p2p, byte[] hostHash, ShmTransport shm) {
        RankInfo peer = infos[next];
        if (p2p) {
            return openP2p(next, hostHash, DevCommLayout.ringProbe(rank));
        }
        byte[] raw = peer.entry(ENTRY_HOST);
        if (raw == null) {
            throw new CclException("rank " + rank + ": rank " + next + " offers no host staging window (its /dev/shm is "
                    + "unusable) and the two GPUs cannot reach each other peer-to-peer");
        }
        GpuConnectBlob blob = GpuConnectBlob.decode(raw, next, size, hostHash);
        return PeerWindow.staged(device, shm, peer.entry(ENTRY_HOST_SHM), peer, blob, "rank " + rank);
    }

    /**
     * A peer's P2P window. The successor probes the window's probe word; the other ranks that open it for
     * one-shot pushes each probe a word only they write: the first line of their own parity-1 inbox.
     */
    private PeerWindow openP2p(int peer, byte[] hostHash, long probeOffset) {
        GpuConnectBlob blob = GpuConnectBlob.decode(infos[peer].entry(ENTRY_P2P), peer, size, hostHash);
        if (infos[peer].sameProcess(infos[rank])) {
            return PeerWindow.direct(device, blob, stream, where, probeOffset);
        }
        try {
            Duration fetchTimeout = Duration.ofNanos(Math.max(0, timeoutNs));
            return PeerWindow.otherProcess(device, blob, stream, where, probeOffset, fetchTimeout);
        } catch (RuntimeException e) {
            if (isDead(peer)) { // its descriptor server or IPC handle went with it
                throw new PeerFailedException(peer, "rank " + rank + " on " + device.where() + ": rank " + peer + " (pid "
                        + infos[peer].pid() + ") died while this rank opened its GPU window (" + e.getMessage() + ")", e);
            }
            throw e;
        }
    }

    /**
     * The kernel's view of the rings and of the one-shot inboxes (DevCommLayout), written once to device
     * memory. Channel c receives in {@code recvWindows[c]} and sends into {@code sendWindows[c]}; abort
     * words are those of channel 0's windows, so an abort travels round channel 0's ring.
     */
    private void writeDevComm(SegmentLayout layout, long[] recvWindows, long[] sendWindows, int channels,
                              long inboxBytes, long[] inboxes) {
        ChannelLayout ch = layout.channel();
        // Channel states, then the kernel's blocks-done counter on its own 64 bytes.
        long statesBytes = (long) DevCommLayout.STATE_BYTES * DevCommLayout.MAX_CHANNELS;
        channelState = own(DeviceBuffer.allocate(device, statesBytes + 64, "rank " + rank));
        channelState.fill((byte) 0, stream);
        ByteBuffer b = ByteBuffer.allocate(DevCommLayout.BYTES).order(ByteOrder.LITTLE_ENDIAN);
        b.putLong(DevCommLayout.RANK, rank);
        b.putLong(DevCommLayout.NRANKS, size);
        b.putLong(DevCommLayout.LL_SLOT_BYTES, ch.llSlotBytes());
        b.putLong(DevCommLayout.SIMPLE_SLOT_BYTES, ch.simpleSlotBytes());
        b.putLong(DevCommLayout.MY_STATE, recvWindows[0] + SegmentLayout.STATE_OFFSET);
        b.putLong(DevCommLayout.NEXT_STATE, sendWindows[0] + SegmentLayout.STATE_OFFSET);
        b.putLong(DevCommLayout.HOST_STATUS, status.devicePointer());
        b.putLong(DevCommLayout.TIMEOUT_NS, timeoutNs);
        b.putLong(DevCommLayout.BLOCKS_DONE, channelState.address() + statesBytes);
        b.putLong(DevCommLayout.CALLS, channelState.address() + statesBytes + 8);
        // Each channel's ring order, for the kernels' block indices (reduce-scatter, all-gather) and root.
        ByteBuffer orders = ByteBuffer.allocate(channels * size * 4).order(ByteOrder.LITTLE_ENDIAN);
        for (int c = 0; c < channels; c++) {
            for (int i = 0; i < size; i++) {
                orders.putInt(rings.get(c).rankAt(i));
            }
        }
        ringOrders = own(DeviceBuffer.allocate(device, orders.capacity(), "rank " + rank));
        ringOrders.copyFromArray(orders.array(), orders.capacity(), stream);
        for (int c = 0; c < channels; c++) {
            int at = DevCommLayout.channel(c);
            long recv = recvWindows[c] + layout.channelOffset(c);
            long send = sendWindows[c] + layout.channelOffset(c);
            b.putLong(at + DevCommLayout.RECV_LL, recv + ch.llSlotOffset(0));
            b.putLong(at + DevCommLayout.RECV_SIMPLE, recv + ch.simpleSlotOffset(0));
            b.putLong(at + DevCommLayout.RECV_LL_HEAD, recv + ChannelLayout.LL_HEAD_OFFSET);
            b.putLong(at + DevCommLayout.RECV_SIMPLE_HEAD, recv + ChannelLayout.SIMPLE_HEAD_OFFSET);
            b.putLong(at + DevCommLayout.RECV_SIMPLE_TAIL, recv + ChannelLayout.SIMPLE_TAIL_OFFSET);
            b.putLong(at + DevCommLayout.SEND_LL, send + ch.llSlotOffset(0));
            b.putLong(at + DevCommLayout.SEND_SIMPLE, send + ch.simpleSlotOffset(0));
            b.putLong(at + DevCommLayout.SEND_LL_HEAD, send + ChannelLayout.LL_HEAD_OFFSET);
            b.putLong(at + DevCommLayout.SEND_SIMPLE_HEAD, send + ChannelLayout.SIMPLE_HEAD_OFFSET);
            b.putLong(at + DevCommLayout.SEND_SIMPLE_TAIL, send + ChannelLayout.SIMPLE_TAIL_OFFSET);
            b.putLong(at + DevCommLayout.STATE, channelState.address() + (long) c * DevCommLayout.STATE_BYTES);
            b.putLong(at + DevCommLayout.RING_ORDER, ringOrders.address() + (long) c * size * 4);
            b.putLong(at + DevCommLayout.RING_POSITION, rings.get(c).positionOf(rank));
        }
        b.putLong(DevCommLayout.ONE_SHOT_INBOX_BYTES, inboxBytes);
        for (int r = 0; inboxBytes > 0 && r < size; r++) {
            b.putLong(DevCommLayout.ONE_SHOT_PEER + 8 * r, inboxes[r]);
        }
        devComm = own(DeviceBuffer.allocate(device, DevCommLayout.BYTES, "rank " + rank));
        devComm.copyFromArray(b.array(), DevCommLayout.BYTES, stream);
        argsView.putLong(DevCommLayout.ARG_COMM, devComm.address());
    }

    /**
     * The LL128 part of DevComm (DevCommLayout.LL128): each channel's slots and head in this rank's window
     * and in the successor's, and its Ll128State in a device buffer of this rank.
     */
    private void writeLl128Connections(GpuLl128Layout layout, long[] recvWindows, long[] sendWindows, long ll128Offset,
            int channels) {
        DeviceBuffer states = own(DeviceBuffer.allocate(device,
                (long) DevCommLayout.MAX_CHANNELS * DevCommLayout.LL128_CHANNEL_BYTES, "rank " + rank));
        states.fill((byte) 0, stream);
        ByteBuffer b = ByteBuffer.allocate(DevCommLayout.MAX_CHANNELS * DevCommLayout.LL128_CHANNEL_BYTES)
                .order(ByteOrder.LITTLE_ENDIAN);
        for (int c = 0; c < channels; c++) {
            int at = c * DevCommLayout.LL128_CHANNEL_BYTES;
            long recv = recvWindows[c] + ll128Offset + layout.channelOffset(c);
            long send = sendWindows[c] + ll128Offset + layout.channelOffset(c);
            b.putLong(at + DevCommLayout.LL128_RECV_SLOTS, recv + GpuLl128Layout.SLOTS_OFFSET);
            b.putLong(at + DevCommLayout.LL128_RECV_HEAD, recv + GpuLl128Layout.HEAD_OFFSET);
            b.putLong(at + DevCommLayout.LL128_SEND_SLOTS, send + GpuLl128Layout.SLOTS_OFFSET);
            b.putLong(at + DevCommLayout.LL128_SEND_HEAD, send + GpuLl128Layout.HEAD_OFFSET);
            b.putLong(at + DevCommLayout.LL128_STATE, states.address() + (long) c * DevCommLayout.LL128_CHANNEL_BYTES);
            b.putLong(at + DevCommLayout.LL128_SLOT_BYTES, layout.slotBytes());
        }
        DeviceBuffer.copyArrayToDevice(devComm.address() + DevCommLayout.LL128, b.array(), b.capacity(), stream, where);
    }

    // ---- Collectives. ------------------------------------------------------------------------------

    @Override
    public int rank() {
        return rank;
    }

    @Override
    public int size() {
        return size;
    }

    @Override
    public MemoryKind memoryKind() {
        return MemoryKind.DEVICE;
    }

    /** The GPU this rank runs on. */
    public CudaDevice device() {
        return device;
    }

    /**
     * True where some process holds several ranks of this communicator on one GPU, false where each
     * process's ranks have GPUs of their own; the same on every rank. Stream-ordered calls are not for
     * such layouts: two ranks' streams of one context can land in one hardware queue (there are
     * CUDA_DEVICE_MAX_CONNECTIONS of them), and then a rank's copy or kernel queued behind its peer's
     * collective, which waits for that rank, never runs: on one H200, 2 ranks as threads, a stream-ordered
     * reduce-scatter / all-gather / broadcast sequence hung in 1 of 3 runs of GpuStreamOrderedTest.
     * Callers that choose between blocking and stream-ordered calls (GpuModelTrainer) ask this.
     */
    public boolean someProcessSharesAGpu() {
        return someProcessSharesAGpu;
    }

    /** The stream collectives run on (non-blocking); copies that must order with them can use it. */
    public CudaStream stream() {
        return stream;
    }

    /** The ring channel {@code channel} runs (logs, tests); null for a single rank or a channel past the last. */
    Ring ring(int channel) {
        return channel < rings.size() ? rings.get(channel) : null;
    }

    /** How this rank is connected, for logs and benchmarks. */
    public String describeLinks() {
        return links;
    }

    @Override
    public void allReduce(long sendAddress, long recvAddress, long count, DataType type, ReduceOp op) {
        run(Kind.ALL_REDUCE, sendAddress, recvAddress, count, type, op, 0);
    }

    @Override
    public void reduceScatter(long sendAddress, long recvAddress, long recvCount, DataType type, ReduceOp op) {
        run(Kind.REDUCE_SCATTER, sendAddress, recvAddress, recvCount, type, op, 0);
    }

    @Override
    public void allGather(long sendAddress, long recvAddress, long sendCount, DataType type) {
        run(Kind.ALL_GATHER, sendAddress, recvAddress, sendCount, type, ReduceOp.SUM, 0);
    }

    @Override
    public void broadcast(long sendAddress, long recvAddress, long count, DataType type, int root) {
        checkRoot(root);
        run(Kind.BROADCAST, sendAddress, recvAddress, count, type, ReduceOp.SUM, root);
    }

    private void checkRoot(int root) {
        if (root < 0 || root >= size) {
            throw new IllegalArgumentException("root " + root + " is not a rank of this communicator of " + size);
        }
    }

    @Override
    public void barrier() {
        run(Kind.BARRIER, barrierBuffer.address(), barrierBuffer.address(), 1, DataType.INT32, ReduceOp.SUM, 0);
    }

    // ---- Stream-ordered calls (NCCL's kind). ----------------------------------------------------------

    /**
     * Queues an all-reduce on {@code on} and returns at once: it runs after the work queued there
     * before it, and work queued after it sees its result; calls queued back to back pipeline (no host
     * wait between them). It can be captured into a CUDA graph ({@code CudaGraph.capture}) and
     * replayed: the kernels number their calls themselves. Calls of this communicator on different
     * streams run in the order they were made (a call on a new stream waits for the previous stream's).
     *
     * <p>Failures (a mismatch with the other ranks, a dead peer, a timeout, a cancelled task) surface
     * as an exception naming this rank and the call at the next call on this communicator, at
     * {@link #synchronize} or at {@link #checkErrors}; meanwhile the kernels stop at their next poll
     * instead of hanging (a {@link GpuPeerWatcher} raises the abort word when a peer process dies or the
     * task is cancelled). A blocking call first waits for the stream-ordered calls before it. Ranks of
     * one process that share a GPU must make each call in the same mode (both stream-ordered or both
     * blocking); what stream-ordered calls then rely on is in docs/architecture.md.
     */
    public void allReduce(long sendAddress, long recvAddress, long count, DataType type, ReduceOp op, CudaStream on) {
        enqueue(Kind.ALL_REDUCE, sendAddress, recvAddress, count, type, op, 0, on);
    }

    /** {@link #reduceScatter(long, long, long, DataType, ReduceOp)}, stream-ordered as {@link #allReduce(long, long, long, DataType, ReduceOp, CudaStream)}. */
    public void reduceScatter(long sendAddress, long recvAddress, long recvCount, DataType type, ReduceOp op,
                              CudaStream on) {
        enqueue(Kind.REDUCE_SCATTER, sendAddress, recvAddress, recvCount, type, op, 0, on);
    }

    /** {@link #allGather(long, long, long, DataType)}, stream-ordered as {@link #allReduce(long, long, long, DataType, ReduceOp, CudaStream)}. */
    public void allGather(long sendAddress, long recvAddress, long sendCount, DataType type, CudaStream on) {
        enqueue(Kind.ALL_GATHER, sendAddress, recvAddress, sendCount, type, ReduceOp.SUM, 0, on);
    }

    /** {@link #broadcast(long, long, long, DataType, int)}, stream-ordered as {@link #allReduce(long, long, long, DataType, ReduceOp, CudaStream)}. */
    public void broadcast(long sendAddress, long recvAddress, long count, DataType type, int root, CudaStream on) {
        checkRoot(root);
        enqueue(Kind.BROADCAST, sendAddress, recvAddress, count, type, ReduceOp.SUM, root, on);
    }

    /** Waits until the work queued on {@code on} is done, then throws if a stream-ordered call failed. */
    public void synchronize(CudaStream on) {
        try {
            on.synchronize();
        } catch (CudaException e) {
            throw failedCuda("the stream-ordered calls on " + device.where(), e);
        }
        if (streamCalls != null) {
            streamCalls.synchronizedWith(on);
        }
        checkErrors();
    }

    /**
     * Throws if a stream-ordered call has failed so far (as far as the GPU got), naming the call; does not
     * wait. Also throws when the communicator is closed or broken.
     */
    public void checkErrors() {
        checkUsable();
        if (size == 1) {
            return;
        }
        int code = statusView.getIntVolatile(DevCommLayout.STATUS_CODE);
        int dead = watcher == null ? -1 : watcher.deadPeer();
        boolean cancelledSeen = watcher != null && watcher.cancelSeen();
        if (abortRecords != null) {
            abortRecords.removeNameOnceEveryPeerMappedIt();
        }
        // A peer that aborted (also between collectives): the next call fails at once, naming it.
        PeerFailedException aborted = dead >= 0 || abortRecords == null ? null : abortRecords.peerAbort(
                code == DevCommLayout.CODE_OK && !streamCalls.pending() ? "before this rank's next collective"
                        : "while this rank's stream-ordered collectives ran");
        if (code == DevCommLayout.CODE_OK && dead < 0 && !cancelledSeen && aborted == null) {
            return;
        }
        String call = failedStreamCall();
        if (aborted != null) {
            record(aborted);
            markBroken(aborted.getMessage());
            throw aborted;
        }
        if (cancelledSeen && dead < 0) {
            CclException e = ownFailure("rank " + rank + " on " + device.where() + ": " + call
                    + " cancelled (task killed); the other ranks stop with an abort", "while " + call + " ran");
            markBroken(e.getMessage());
            throw e;
        }
        throw fail(call, code, dead);
    }

    /** The call whose kernel failed first, as this rank queued it (its ticket is in the status block). */
    private String failedStreamCall() {
        int ticket = statusView.getIntVolatile(DevCommLayout.STATUS_FAILED_TICKET);
        CollectiveHeader call = ticket == 0 ? null : streamCalls.call(ticket);
        if (call != null) {
            return call.describe() + ", stream-ordered";
        }
        return ticket == 0 ? "a stream-ordered collective" : "stream-ordered collective #" + ticket;
    }

    private void enqueue(Kind kind, long send, long recv, long count, DataType type, ReduceOp op, int root,
                         CudaStream on) {
        if (on.device() != device) {
            throw new IllegalArgumentException("rank " + rank + ": the stream belongs to " + on.device().where()
                    + ", this communicator to " + device.where());
        }
        if (!accept(send, recv, count, type)) {
            return;
        }
        if (size == 1) {
            copySingleRank(send, recv, count, type, on);
            return;
        }
        if (gateId != null) {
            awaitInProcessPeers();
        }
        if (watcher == null) {
            watcher = own(new GpuPeerWatcher("sparkccl-gpu-watch-rank" + rank, size, this::isDead, cancelled,
                    () -> abortRecords != null && abortRecords.peerAbort("") != null,
                    () -> statusView.putIntVolatile(DevCommLayout.STATUS_HOST_ABORT, 1)));
        }
        streamCalls.before(on);
        GpuPlan plan = tuner.plan(kind, count, type, size);
        CollectiveHeader header = new CollectiveHeader(++sequence, kind, type, op, plan.protocol, root, count);
        putArgs(header, plan, send, recv);
        launch(plan, on);
        streamCalls.queued(header);
    }

    /** Waits for the stream-ordered calls queued so far, then throws if one of them failed. */
    private void drainStreamCalls(String what) {
        try {
            streamCalls.drain(what);
        } catch (CudaException e) {
            throw failedCuda("the stream-ordered calls before " + what, e);
        }
        checkErrors();
    }

    private void run(Kind kind, long send, long recv, long count, DataType type, ReduceOp op, int root) {
        if (!accept(send, recv, count, type)) {
            return;
        }
        if (streamCalls.pending()) {
            drainStreamCalls("rank " + rank + ": a blocking " + kind);
        }
        if (size == 1) {
            copySingleRank(send, recv, count, type, stream);
            stream.synchronize();
            return;
        }
        if (gateId != null) {
            awaitInProcessPeers();
        }
        GpuPlan plan = tuner.plan(kind, count, type, size);
        int seq = ++sequence;
        CollectiveHeader header = new CollectiveHeader(seq, kind, type, op, plan.protocol, root, count);
        CclException gateFailure = null;
        if (launchGate != null) {
            try {
                launchGate.awaitPeers(cancelled, timeoutNs, "rank " + rank + " on " + device.where() + ": "
                        + header.describe());
            } catch (CclException e) {
                // Launch anyway, with the abort raised: the kernel stops at its first wait and raises every
                // peer's abort word, so ranks in other processes stop too instead of waiting for the timeout.
                gateFailure = e;
                record(e); // before the abort word: the peers read why
                statusView.putIntVolatile(DevCommLayout.STATUS_HOST_ABORT, 1);
            }
        }
        putArgs(header, plan, send, recv);
        boolean viaResident = resident != null && plan.oneShot && count * type.size() <= ResidentKernel.MAX_BYTES;
        long launchStart = System.nanoTime();
        if (viaResident) {
            resident.ring(argsView, seq);
        } else {
            launch(plan, stream);
        }
        lastLaunchNanos = System.nanoTime() - launchStart;
        try {
            waitForKernel(header, viaResident);
        } catch (CudaException e) {
            if (gateFailure == null) {
                throw failedCuda(header.describe(), e);
            }
        } catch (CclException e) {
            if (gateFailure == null) {
                throw e;
            }
        }
        if (gateFailure != null) {
            markBroken(gateFailure.getMessage());
            throw gateFailure;
        }
        lastKernelNanos = statusView.getLongVolatile(DevCommLayout.STATUS_END_NS)
                - statusView.getLongVolatile(DevCommLayout.STATUS_START_NS);
    }

    /** The kernel's arguments for the call {@code header} describes (its sequence number is the ticket). */
    private void putArgs(CollectiveHeader header, GpuPlan plan, long send, long recv) {
        argsView.putLong(DevCommLayout.ARG_SEND, send);
        argsView.putLong(DevCommLayout.ARG_RECV, recv);
        argsView.putLong(DevCommLayout.ARG_COUNT, header.count);
        argsView.putLong(DevCommLayout.ARG_BLOCK, plan.blockElems);
        argsView.putLong(DevCommLayout.ARG_TOTAL, plan.totalElems);
        argsView.putLong(DevCommLayout.ARG_CHUNK, plan.chunkElems);
        argsView.putLong(DevCommLayout.ARG_SLICE, plan.sliceElems);
        argsView.putInt(DevCommLayout.ARG_TICKET, header.sequence);
        argsView.putInt(DevCommLayout.ARG_KIND, header.kind.ordinal());
        argsView.putInt(DevCommLayout.ARG_TYPE, header.type.ordinal());
        argsView.putInt(DevCommLayout.ARG_OP, header.op.ordinal());
        argsView.putInt(DevCommLayout.ARG_PROTO, plan.protocol.ordinal());
        argsView.putInt(DevCommLayout.ARG_ROOT, header.root);
        argsView.putInt(DevCommLayout.ARG_NCHANNELS, plan.channels);
        if (log.traceEnabled(Subsys.COLL)) {
            log.trace(Subsys.COLL, "%s: %s", header.describe(), plan);
        }
    }

    /** Queues the plan's kernel, with the arguments in argsView, on {@code on}. */
    private void launch(GpuPlan plan, CudaStream on) {
        CUfunction function = module.function(plan.kernel);
        Cuda.check(JCudaDriver.cuLaunchKernel(function, plan.channels, 1, 1, plan.threads, 1, 1, 0, on.handle(),
                kernelParams, null), "cuLaunchKernel(" + plan.kernel + ", " + plan.channels + " blocks)", where);
    }

    /**
     * Checks a call's arguments, and that no call before it failed (also a stream-ordered one nobody
     * waited for); false when there is nothing to do (count 0).
     */
    private boolean accept(long send, long recv, long count, DataType type) {
        checkErrors();
        if (count < 0) {
            throw new IllegalArgumentException("negative count " + count);
        }
        if (send % type.size() != 0 || recv % type.size() != 0) {
            throw new IllegalArgumentException("device addresses must be aligned to the element size (" + type.size()
                    + " bytes for " + type.ncclName() + "): send 0x" + Long.toHexString(send) + ", recv 0x"
                    + Long.toHexString(recv));
        }
        if (count == 0) {
            return false;
        }
        device.makeCurrent();
        return true;
    }

    private void awaitInProcessPeers() {
        try {
            if (!InProcessConnectGate.awaitAll(gateId, TimeUnit.NANOSECONDS.toMillis(timeoutNs))) {
                log.warn(Subsys.INIT, "rank %d: ranks of this process are still connecting after %d ms; going on",
                        rank, TimeUnit.NANOSECONDS.toMillis(timeoutNs));
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new CclException("rank " + rank + ": interrupted while waiting for the ranks of this process to connect");
        }
        gateId = null;
    }

    /** A collective of one rank: its output is its input (a barrier's buffers are the same). */
    private void copySingleRank(long send, long recv, long count, DataType type, CudaStream on) {
        if (send == recv) {
            return;
        }
        long bytes = count * type.size();
        Cuda.check(JCudaDriver.cuMemcpyDtoDAsync(Cuda.devicePointer(recv), Cuda.devicePointer(send), bytes,
                on.handle()), "cuMemcpyDtoDAsync(" + bytes + " bytes)", where);
    }

    /**
     * Waits until the kernel says it is done: its last block writes the call's sequence number into
     * mapped host memory, which costs a memory read to poll (the driver's stream query is a JNI call of
     * about a microsecond). The stream is asked too, now and then, so that a kernel that crashed is
     * noticed. Meanwhile every peer process is checked to be alive; if one died, the kernel is asked to
     * stop (host abort word) and the call fails naming it. The kernel has its own timeout; this one only
     * backs it up.
     */
    private void waitForKernel(CollectiveHeader header, boolean viaResident) {
        CudaStream kernelStream = viaResident ? resident.stream() : stream;
        long start = System.nanoTime();
        long nextCheck = start + PEER_CHECK_INTERVAL_NS;
        int idles = 0;
        int deadPeer = -1;
        boolean hostTimedOut = false;
        String stoppedBy = null;
        CclException stopped = null;
        PeerFailedException peerAbort = null;
        int seq = header.sequence;
        idle.reset();
        while (statusView.getIntVolatile(DevCommLayout.STATUS_DONE_SEQ) != seq) {
            ++idles;
            if (viaResident && (idles & 63) == 0) {
                resident.relaunchIfMissed(statusView, seq);
            }
            if ((idles & 1023) == 0 && kernelStream.isIdle() && statusView.getIntVolatile(DevCommLayout.STATUS_DONE_SEQ) != seq) {
                throw fail(header.describe(), DevCommLayout.CODE_KERNEL_LOST, deadPeer);
            }
            idle.idle();
            if (!idle.pastSpinning()) {
                continue;
            }
            if (stoppedBy == null) {
                // The kernel cannot be killed: it is asked to stop, raises every rank's abort word, and ends.
                if (Thread.currentThread().isInterrupted()) {
                    stoppedBy = "interrupted";
                } else if (cancelled.getAsBoolean()) {
                    stoppedBy = "cancelled (task killed)";
                }
                if (stoppedBy != null) {
                    stopped = ownFailure("rank " + rank + " on " + device.where() + ": " + header.describe() + " "
                            + stoppedBy + "; the other ranks stop with an abort", "while this rank waited for "
                            + header.describe());
                    statusView.putIntVolatile(DevCommLayout.STATUS_HOST_ABORT, 1);
                }
            }
            long now = System.nanoTime();
            if (now - nextCheck > 0) {
                nextCheck = now + PEER_CHECK_INTERVAL_NS;
                if (deadPeer < 0) {
                    deadPeer = deadPeer();
                    if (deadPeer >= 0) {
                        statusView.putIntVolatile(DevCommLayout.STATUS_HOST_ABORT, 1);
                    }
                }
                if (deadPeer < 0 && peerAbort == null && stoppedBy == null && abortRecords != null) {
                    // A peer that failed outside a collective (its task, between them) has no kernel to stop ours.
                    peerAbort = abortRecords.peerAbort("while this rank waited for " + header.describe());
                    if (peerAbort != null) {
                        record(peerAbort);
                        statusView.putIntVolatile(DevCommLayout.STATUS_HOST_ABORT, 1);
                    }
                }
                if (!hostTimedOut && timeoutNs > 0 && now - start > timeoutNs + TimeUnit.SECONDS.toNanos(10)) {
                    hostTimedOut = true;
                    statusView.putIntVolatile(DevCommLayout.STATUS_HOST_ABORT, 1);
                }
            }
        }
        if (stopped != null) {
            markBroken(stopped.getMessage());
            throw stopped;
        }
        if (peerAbort != null && deadPeer < 0) {
            markBroken(peerAbort.getMessage());
            throw peerAbort;
        }
        int code = statusView.getIntVolatile(DevCommLayout.STATUS_CODE);
        if (code == DevCommLayout.CODE_OK && deadPeer < 0 && !hostTimedOut) {
            if (hostWindowToUnlink != null) {
                hostWindowToUnlink.unlinkName(); // the predecessor has it mapped: it just wrote into it
                hostWindowToUnlink = null;
            }
            return;
        }
        throw fail(header.describe(), code, deadPeer);
    }

    private void cleanUpAfterDeadPeers() {
        cleanUpAfterDeadPeers(0);
    }

    /** As {@link #cleanUpAfterDeadPeers()}, waiting up to {@code graceNs} for a peer to be seen dead. */
    private void cleanUpAfterDeadPeers(long graceNs) {
        if (infos == null) {
            return; // the ranks never met: their segment names are not known here (the stale scan removes them)
        }
        long deadline = System.nanoTime() + graceNs;
        while (!anyPeerDead() && System.nanoTime() < deadline) {
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(10));
        }
        for (int r = 0; r < size; r++) {
            if (infos[r] != null && isDead(r)) {
                cleanUpAfter(r);
            }
        }
    }

    /** Removes what dead rank {@code peer} left in /dev/shm (a window it had not unlinked yet). */
    private void cleanUpAfter(int peer) {
        if (shm != null) {
            shm.cleanUpAfter(infos[peer].pid());
        }
    }

    /**
     * A CUDA call that failed while this rank waited for its kernel, with a peer dead: the error names
     * the dead peer, and says that this process's CUDA context, which such an error breaks for good,
     * goes with it. (Every such loss measured in the kill trials was the Simple kernel's own null read
     * after the abort, fixed in ring_kernels.cu; windows are CUDA virtual memory, so a dead peer's
     * window stays mapped here: see GpuWindow.Device.)
     */
    private CclException failedCuda(String call, CudaException cuda) {
        int dead = deadPeer();
        if (dead < 0) {
            return cuda;
        }
        cleanUpAfter(dead);
        String message = "rank " + rank + " on " + device.where() + ": " + call + " failed: rank " + dead
                + " (pid " + infos[dead].pid() + ") died during this call, and this rank's kernel failed ("
                + cuda.getMessage() + "); this communicator is unusable, and so is this process's CUDA"
                + " context after such an error: the process must be restarted (in Spark, the executor)";
        PeerFailedException e = new PeerFailedException(dead, message, cuda);
        record(e);
        markBroken(message);
        return e;
    }

    private boolean anyPeerDead() {
        for (int r = 0; r < size; r++) {
            if (infos[r] != null && isDead(r)) {
                return true;
            }
        }
        return false;
    }

    private int deadPeer() {
        for (int r = 0; r < size; r++) {
            if (isDead(r)) {
                return r;
            }
        }
        return -1;
    }

    /** Rank r's process has ended (it is another process than this one). */
    private boolean isDead(int r) {
        long pid = infos[r].pid();
        return pid != HostIdentity.pid() && !HostIdentity.isAlive(pid);
    }

    /** The failure of {@code call} (its description), from the kernel's status code or a dead peer. */
    private CclException fail(String call, int code, int deadPeer) {
        String what = "rank " + rank + " on " + device.where() + ": " + call;
        CclException e;
        if (deadPeer >= 0) {
            cleanUpAfter(deadPeer);
            e = new PeerFailedException(deadPeer, what + " failed: rank " + deadPeer + " (pid " + infos[deadPeer].pid()
                    + ") died; this communicator is unusable: every rank must start again with a new one");
        } else if (code == DevCommLayout.CODE_MISMATCH) {
            // Both headers as the kernels sent them (their sequence numbers are the kernels' own counts).
            CollectiveHeader mine = CollectiveHeader.read(status.address() + DevCommLayout.STATUS_MY_HEADER);
            CollectiveHeader theirs = CollectiveHeader.read(status.address() + DevCommLayout.STATUS_THEIR_HEADER);
            int channel = statusView.getIntVolatile(DevCommLayout.STATUS_CHANNEL);
            int prev = rings.get(channel < rings.size() ? channel : 0).prev(rank);
            e = new CclException("rank " + rank + ": collective mismatch: this rank called "
                    + (mine == null ? call : mine.describe())
                    + " but rank " + prev + " called "
                    + (theirs == null ? "something else (unreadable header)" : theirs.describe())
                    + ": every rank must call the same collectives in the same order with the same count, type and op");
        } else if (code == DevCommLayout.CODE_TIMEOUT) {
            e = new CclTimeoutException(what + " timed out after " + TimeUnit.NANOSECONDS.toMillis(timeoutNs)
                    + " ms waiting for a peer (channel " + statusView.getIntVolatile(DevCommLayout.STATUS_CHANNEL)
                    + "); a rank may be stuck or may have skipped this collective (raise SPARKCCL_TIMEOUT_MS if the"
                    + " ranks are just slow)");
        } else if (code == DevCommLayout.CODE_KERNEL_LOST) {
            e = new CclException(what + ": the collective kernel ended without reporting completion (it was lost "
                    + "or crashed); run with compute-sanitizer to find out why");
        } else if (code == DevCommLayout.CODE_PEER_ABORT) {
            PeerFailedException named = abortRecords == null ? null
                    : abortRecords.awaitPeerAbort("while this rank waited for " + call, GpuAbortRecords.RECORD_WAIT_MS);
            // Unnamed, it is not recorded: a peer reading this rank's record would take this rank for the cause.
            e = named != null ? named : new CclException(what + " aborted because another rank failed; that rank's "
                    + "error says why");
            if (named == null) {
                markBroken(e.getMessage());
                return e;
            }
        } else {
            e = new CclTimeoutException(what + " did not finish within SPARKCCL_TIMEOUT_MS plus 10 s; it was stopped");
        }
        record(e);
        markBroken(e.getMessage());
        return e;
    }

    /**
     * Writes {@code e} to this rank's abort record, where peers read why it failed; the rank it names
     * as the cause is the peer that failed first (a {@link PeerFailedException}'s), else this rank.
     */
    private void record(CclException e) {
        if (abortRecords != null) {
            abortRecords.markAborted(e instanceof PeerFailedException ? ((PeerFailedException) e).failedRank() : rank,
                    String.valueOf(e.getMessage()));
        }
    }

    /**
     * A failure of this rank's own (its task cancelled or killed, its wait interrupted), recorded for
     * its peers before it raises its abort word. A peer whose record says it failed before is the cause
     * (Spark kills the rest of a barrier stage because one task failed): then the error, and the
     * record, name that peer; {@code when} says what this rank was doing.
     */
    private CclException ownFailure(String message, String when) {
        PeerFailedException before = abortRecords == null ? null : abortRecords.peerAbort(when);
        CclException e = before == null ? new CclException(message)
                : new PeerFailedException(before.failedRank(), message + "; before that: " + before.getMessage(), before);
        record(e);
        return e;
    }

    /**
     * Tells the peers that this rank failed outside its collectives (its Spark task failed or was
     * killed between them): its abort record says {@code reason}, so that a peer waiting in a
     * collective for this rank, or entering one, fails within its next check (50 ms) naming this rank
     * and the reason; this rank's stream-ordered calls still queued stop. Does nothing once closed or
     * broken (a failed collective already recorded why).
     */
    @Override
    public void abort(String reason) {
        if (closed || brokenBy != null || size == 1) {
            return;
        }
        CclException e = ownFailure("rank " + rank + ": " + reason, "while this rank was between collectives");
        markBroken(e.getMessage());
        statusView.putIntVolatile(DevCommLayout.STATUS_HOST_ABORT, 1);
    }

    /**
     * The communicator is unusable from now on, for the reason given. A rank that failed also takes no
     * more part in launching together: its peers go on and meet the failure.
     */
    private void markBroken(String reason) {
        brokenBy = reason;
        if (launchGate != null) {
            launchGate.close();
        }
    }

    /**
     * Fails this communicator for a reason outside its kernels (the other level of a two-level
     * communicator failed), so that peers waiting for this rank in a kernel, or launching one later, stop
     * at once instead of at the timeout: a barrier kernel launched with the host abort raised stops at its
     * first wait and raises the abort words of its ring neighbours (an abort travels round channel 0's
     * ring). It bypasses the launch gate: a peer of this process may be inside a kernel that waits for this
     * rank and never come to the gate. Does nothing once closed or broken (peers know then).
     */
    void abortPeers(String reason) {
        if (closed || brokenBy != null) {
            return;
        }
        // The record first, as every failure of this rank's own: peers stopped by the kernel name the reason.
        record(new CclException(reason));
        markBroken(reason);
        if (size == 1) {
            return;
        }
        try {
            device.makeCurrent();
            statusView.putIntVolatile(DevCommLayout.STATUS_HOST_ABORT, 1);
            GpuPlan plan = tuner.plan(Kind.BARRIER, 1, DataType.INT32, size);
            putArgs(new CollectiveHeader(++sequence, Kind.BARRIER, DataType.INT32, ReduceOp.SUM, plan.protocol, 0, 1),
                    plan, barrierBuffer.address(), barrierBuffer.address());
            launch(plan, stream);
            stream.synchronize();
        } catch (RuntimeException e) {
            // The peers then learn it from their own waits (a dead peer, the timeout): nothing more to do here.
            log.warn(Subsys.INIT, "rank %d: the abort kernel failed (%s); peers learn of this rank's failure later",
                    rank, e.getMessage());
        }
    }

    private void checkUsable() {
        if (closed) {
            throw new IllegalStateException("rank " + rank + ": the GPU communicator is closed");
        }
        if (brokenBy != null) {
            throw new CclException("rank " + rank + ": the GPU communicator is unusable after an earlier failure ("
                    + brokenBy + "); close it and build a new one");
        }
    }

    // ---- Staging for Java arrays. ------------------------------------------------------------------

    /**
     * Device memory for the array overloads. Buffers are kept and reused until the communicator
     * closes: freeing device memory between collectives could wait on another rank's kernel.
     */
    @Override
    public StagingBuffer allocateStaging(long bytes) {
        checkUsable();
        DeviceBuffer buffer = null;
        synchronized (stagingPool) {
            for (int i = 0; i < stagingPool.size(); i++) {
                if (stagingPool.get(i).size() >= bytes) {
                    buffer = stagingPool.remove(i);
                    break;
                }
            }
        }
        if (buffer == null) {
            buffer = DeviceBuffer.allocate(device, Math.max(bytes, 4096), "rank " + rank + " staging");
        }
        return new GpuStagingBuffer(buffer, bytes, stream, this::returnStaging);
    }

    private void returnStaging(DeviceBuffer buffer) {
        synchronized (stagingPool) {
            if (closed) {
                buffer.close();
            } else {
                stagingPool.add(buffer);
            }
        }
    }

    // ---- Close. -----------------------------------------------------------------------------------

    /**
     * Frees everything. No peer writes into this rank's window after this rank's last collective has
     * returned (heads live with their receiver), so closing needs no handshake.
     */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        device.makeCurrent();
        RuntimeException first = null;
        if (streamCalls != null && streamCalls.pending()) {
            try {
                streamCalls.drain("rank " + rank + ": close"); // nothing is freed under a kernel still queued
            } catch (RuntimeException e) {
                first = e;
            }
        }
        closed = true;
        synchronized (stagingPool) {
            for (DeviceBuffer b : stagingPool) {
                try {
                    b.close();
                } catch (RuntimeException e) {
                    first = first == null ? e : first;
                }
            }
            stagingPool.clear();
        }
        for (int i = resources.size() - 1; i >= 0; i--) {
            try {
                resources.get(i).close();
            } catch (Exception e) {
                RuntimeException r = e instanceof RuntimeException ? (RuntimeException) e
                        : new CclException("rank " + rank + ": closing " + resources.get(i) + " failed", e);
                if (first == null) {
                    first = r;
                } else {
                    first.addSuppressed(r);
                }
            }
        }
        resources.clear();
        if (first != null) {
            throw first;
        }
    }

    /** How often the resident one-shot kernel was launched (0 without one), for tests. */
    int residentLaunches() {
        return resident == null ? 0 : resident.launches();
    }

    /** Host time of the last kernel launch call (JCuda and the driver), for benchmarks. */
    public long lastLaunchNanos() {
        return lastLaunchNanos;
    }

    /** GPU time of the last collective kernel, from its first block's start to its last block's end. */
    public long lastKernelNanos() {
        return lastKernelNanos;
    }

    /** How an all-reduce of {@code count} elements runs: LL, Simple or 1shot (benchmark columns). */
    public String algorithmFor(long count, DataType type) {
        return size == 1 ? "copy" : tuner.plan(Kind.ALL_REDUCE, count, type, size).algorithm();
    }
}
