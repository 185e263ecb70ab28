package org.sparkccl.ipc.gpu;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import org.agrona.concurrent.UnsafeBuffer;
import org.sparkccl.core.Bootstrap;
import org.sparkccl.core.CclException;
import org.sparkccl.core.PeerFailedException;
import org.sparkccl.core.jdk.JdkAccess;
import org.sparkccl.core.log.CclLog;
import org.sparkccl.core.log.Subsys;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.proto.ChannelLayout;
import org.sparkccl.core.proto.SegmentLayout;
import org.sparkccl.core.shm.ShmTransport;
import org.sparkccl.core.topo.Ring;
import org.sparkccl.core.transport.HostIdentity;
import org.sparkccl.core.transport.RankInfo;
import org.sparkccl.ipc.cuda.CudaDevice;
import org.sparkccl.ipc.cuda.CudaStream;
import org.sparkccl.ipc.cuda.DeviceBuffer;
import org.sparkccl.ipc.cuda.KernelModule;
import org.sparkccl.ipc.cuda.PinnedHostBuffer;
import org.sparkccl.ipc.cuda.StreamMemOps;

/**
 * What one rank of a {@link GpuCommunicator} is connected with, built by {@link #connect} in one
 * bootstrap round: its stream and kernels, its receive windows and the windows of its ring successors
 * (and, for one-shot, of every peer), the kernels' view of them in device memory (DevComm), the mapped
 * host status block the kernels report in, the peers' abort records, and the tuner that follows from
 * the links. It owns every native resource the communicator holds and frees them, last made first, in
 * {@link #closeAll}.
 *
 * <p>The fields are filled in connect's order and read-only after it (but for the two noted), and
 * {@link GpuLauncher} and {@link GpuFailures} read them. A connect that fails leaves what it made so far:
 * the failure path cleans up after dead peers from the rank infos it got, then closes that.
 */
final class GpuConnection {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

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

    final int rank;
    final int size;
    final CudaDevice device;
    final CclLog log;
    final Params params;
    /** This rank's GPU and rank, for CUDA errors. */
    final String where;
    private final List<AutoCloseable> resources = new ArrayList<>();
    CudaStream stream;
    KernelModule module;
    GpuTuner tuner;
    long timeoutNs;
    RankInfo[] infos;
    /** Each channel's ring (empty for a single rank). */
    List<Ring> rings = List.of();
    /** Host windows live in /dev/shm; what a dead peer left there is removed through this. */
    ShmTransport shm;
    /** Why a rank failed, readable by its peers (null without /dev/shm): see {@link GpuAbortRecords}. */
    GpuAbortRecords abortRecords;
    /** The kernels' DevComm: what they need to find the windows, channel states and the status block. */
    DeviceBuffer devComm;
    private DeviceBuffer channelState;
    private DeviceBuffer ringOrders;
    /** What a barrier's kernel reads and writes (it moves no data). */
    DeviceBuffer barrierBuffer;
    /** Where the kernels report (DevCommLayout.STATUS_*), mapped host memory. */
    PinnedHostBuffer status;
    UnsafeBuffer statusView;
    ResidentKernel resident;
    /** Takes small stream-ordered all-reduces without a launch (null where off, or StreamMemOps cannot bind). */
    StreamResidentKernel streamResident;
    StreamCalls streamCalls;
    /**
     * The receive window in /dev/shm, whose name goes once the predecessor has certainly mapped it: after
     * the first collective that completed (GpuLauncher). Changes then, to null.
     */
    GpuWindow.Host hostWindowToUnlink;
    /**
     * Set from connect's round until the first launch: see {@link InProcessConnectGate}. Changes then, to
     * null.
     */
    String gateId;
    /** Ranks of this process on this GPU launch together (null when no other rank here shares it). */
    SharedGpuLaunchGate launchGate;
    /** Some process holds several ranks of this communicator on one GPU (the same answer on every rank). */
    boolean someProcessSharesAGpu;
    int ranksInProcess;
    /** Ranks of this process on this GPU, this one included. */
    int sharingGpu;
    /** The one-shot calls' GPU timestamps (SPARKCCL_PROBE=1), else null. */
    GpuProbes probes;
    /** How this rank is connected, for logs and benchmarks. */
    String links = "";

    GpuConnection(int rank, int size, CudaDevice device, Params params) {
        this.rank = rank;
        this.size = size;
        this.device = device;
        this.params = params;
        this.log = new CclLog(rank, params);
        this.where = device.where() + ", rank " + rank;
    }

    /** Keeps {@code resource} until {@link #closeAll}, which closes it before everything owned earlier. */
    <T extends AutoCloseable> T own(T resource) {
        resources.add(resource);
        return resource;
    }

    /**
     * Closes every resource owned, the last first, each even if one before it failed; the first failure
     * ({@code first} if not null, the others suppressed in it) is returned for the caller to throw.
     */
    RuntimeException closeAll(RuntimeException first) {
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
        return first;
    }

    /** Builds the connection: one {@code allGather} on the bootstrap, every rank together. */
    void connect(Bootstrap bootstrap) {
        for (String line : params.describeSet()) {
            log.info(Subsys.INIT, "%s", line);
        }
        device.makeCurrent();
        stream = own(new CudaStream(device, where));
        module = KernelModule.forDevice(device);
        module.loadAll(GpuPlan.allKernelNames());
        timeoutNs = TimeUnit.MILLISECONDS.toNanos(params.get(Params.TIMEOUT_MS));

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
        GpuLl128Layout ll128Layout = GpuLinkDecisions.ll128Wanted(params, size) ? new GpuLl128Layout(p2pChannels, params.get(Params.LL128_BUFFSIZE)) : null;
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
        RankInfo me = new RankInfo(rank, size, hostId, HostIdentity.pid(), HostIdentity.shmDevice(), Map.of()).withEntry(GpuCommunicator.ENTRY_DEVICE, GpuLinkDecisions.describeDevice(device, p2pDisabled).encode());
        GpuRingFacts.Observed seen = null;
        if (size > 1) {
            seen = GpuRingFacts.observe(device, p2pDisabled, params, log);
            me = seen.addTo(me, params);
        }
        if (deviceWindow != null) {
            me = me.withEntry(GpuCommunicator.ENTRY_P2P, deviceWindow.connectBlob(rank, size, hostHash, device));
        }
        if (hostWindow != null) {
            me = me.withEntry(GpuCommunicator.ENTRY_HOST, hostWindow.connectBlob(rank, size, hostHash, device))
                    .withEntry(GpuCommunicator.ENTRY_HOST_SHM, hostWindow.shmBlob());
        }
        if (size > 1 && shm.unavailableReason() == null) {
            abortRecords = own(new GpuAbortRecords(shm, rank));
            me = me.withEntry(GpuCommunicator.ENTRY_ABORT_RECORD, abortRecords.connectBlob());
        }

        byte[][] all = bootstrap.allGather(me.encode());

        GpuRankInfo[] gpus = meet(all);
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
        channels = Math.min(channels, Math.max(1, MAX_BLOCKS_PER_GPU / GpuLinkDecisions.mostRanksOnOneGpu(gpus)));
        rings = List.copyOf(planned.subList(0, channels));
        boolean ll128 = GpuLinkDecisions.refuseForcedLl128Unless(rings, gpus, rank, params) && ll128Layout != null;
        tuner = new GpuTuner(params, layout, channels, oneShot ? oneShotCapacity : 0, ll128 ? ll128Layout : null,
                GpuLinkDecisions.ringLink(rings, gpus), size);

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
        // Auto: where this process holds one rank, or all of its ranks share this one GPU (ranks as threads
        // on one GPU: their resident kernels run side by side in one context, and the launch gate keeps them
        // in step). Not where a process holds ranks on several GPUs: 4 ranks on 2 GPUs showed calls of ~2 ms
        // (the resident kernel's idle time) now and then, something there waiting for the GPU while another
        // rank's resident kernel idles; not understood yet.
        String residentSetting = params.get(Params.RESIDENT).trim();
        boolean residentAuto = ranksInProcess == 1 || ranksInProcess == sharingGpu;
        if (oneShot && (residentSetting.equals("1") || residentSetting.equalsIgnoreCase("auto") && residentAuto)) {
            resident = own(new ResidentKernel(device, module, devComm.address(), params.get(Params.RESIDENT_THREADS),
                    params.get(Params.RESIDENT_MAX_BYTES), where));
        }
        String streamSetting = params.get(Params.STREAM_RESIDENT).trim();
        boolean streamWanted = streamSetting.equals("1") || streamSetting.equalsIgnoreCase("auto") && !someProcessSharesAGpu;
        if (resident != null && streamWanted) {
            if (StreamMemOps.unavailable() == null) {
                streamResident = own(new StreamResidentKernel(device, module, devComm.address(), params.get(Params.RESIDENT_THREADS), where));
            } else {
                log.info(Subsys.INIT, "rank %d: stream-ordered calls are launched: %s", rank, StreamMemOps.unavailable());
            }
        }
        links = describeLinks(successors, receivesP2p, receivesStaged);
        log.info(Subsys.INIT, "GPU communicator on %s: %s", device.where(), links);
    }

    /**
     * Reads what every rank sent in the round: the rank infos, and from them who shares this process
     * and GPU (the in-process connect gate, the launch gate) and the peers' abort records. Fails where
     * a rank runs on another host. Returns every rank's GPU.
     */
    private GpuRankInfo[] meet(byte[][] all) {
        infos = new RankInfo[size];
        GpuRankInfo[] gpus = new GpuRankInfo[size];
        for (int r = 0; r < size; r++) {
            infos[r] = RankInfo.decode(all[r], r, size);
            gpus[r] = GpuRankInfo.decode(infos[r].entry(GpuCommunicator.ENTRY_DEVICE), r);
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
        sharingGpu = 0;
        for (int r = 0; r < size; r++) {
            sharingGpu += infos[r].sameProcess(infos[rank]) && gpus[r].sameGpu(gpus[rank]) ? 1 : 0;
            for (int q = r + 1; q < size; q++) {
                someProcessSharesAGpu |= infos[q].sameProcess(infos[r]) && gpus[q].sameGpu(gpus[r]);
            }
        }
        GpuLinkDecisions.warnAboutSharedQueues(sharingGpu, device, log);
        if (abortRecords != null) {
            byte[][] recordBlobs = new byte[size][];
            for (int r = 0; r < size; r++) {
                recordBlobs[r] = infos[r].entry(GpuCommunicator.ENTRY_ABORT_RECORD);
            }
            abortRecords.open(shm, infos, recordBlobs);
        }
        if (sharingGpu > 1) {
            launchGate = own(new SharedGpuLaunchGate(gateId, device.ordinal(), sharingGpu));
        }
        return gpus;
    }

    /** How this rank is connected (channel 0's ring, the windows it receives in and sends into, the tuner). */
    private String describeLinks(Map<Integer, PeerWindow> successors, boolean receivesP2p, boolean receivesStaged) {
        StringBuilder via = new StringBuilder();
        for (Map.Entry<Integer, PeerWindow> e : successors.entrySet()) {
            via.append(via.length() == 0 ? "" : ", ").append("to ").append(e.getKey()).append(" via ").append(e.getValue().via());
        }
        return "ring " + rings.get(0).prev(rank) + " -> " + rank + " -> " + rings.get(0).next(rank)
                + (successors.size() > 1 ? " on channel 0 (" + successors.size() + " successors over the rings)" : "")
                + ": receives via "
                + (receivesP2p && receivesStaged ? "P2P and SHM/staged" : receivesP2p ? "P2P" : "SHM/staged")
                + ", sends " + via + ", " + tuner.describe()
                + (resident != null ? ", resident one-shot kernel up to " + resident.maxBytes() + " bytes" : "")
                + (streamResident != null ? " (stream-ordered calls too)" : "");
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

    private PeerWindow openSuccessor(int next, boolean p2p, byte[] hostHash, ShmTransport shm) {
        RankInfo peer = infos[next];
        if (p2p) {
            return openP2p(next, hostHash, DevCommLayout.ringProbe(rank));
        }
        byte[] raw = peer.entry(GpuCommunicator.ENTRY_HOST);
        if (raw == null) {
            throw new CclException("rank " + rank + ": rank " + next + " offers no host staging window (its /dev/shm is "
                    + "unusable) and the two GPUs cannot reach each other peer-to-peer");
        }
        GpuConnectBlob blob = GpuConnectBlob.decode(raw, next, size, hostHash);
        return PeerWindow.staged(device, shm, peer.entry(GpuCommunicator.ENTRY_HOST_SHM), peer, blob, "rank " + rank);
    }

    /**
     * A peer's P2P window. The successor probes the window's probe word; the other ranks that open it for
     * one-shot pushes each probe a word only they write: the first line of their own parity-1 inbox.
     */
    private PeerWindow openP2p(int peer, byte[] hostHash, long probeOffset) {
        GpuConnectBlob blob = GpuConnectBlob.decode(infos[peer].entry(GpuCommunicator.ENTRY_P2P), peer, size, hostHash);
        if (infos[peer].sameProcess(infos[rank])) {
            return PeerWindow.direct(device, blob, stream, where, probeOffset);
        }
        try {
            Duration fetchTimeout = Duration.ofNanos(Math.max(0, timeoutNs));
            return PeerWindow.otherProcess(device, blob, stream, where, probeOffset, fetchTimeout);
        } catch (RuntimeException e) {
            if (GpuFailures.processEnded(infos[peer])) { // its descriptor server or IPC handle went with it
                throw new PeerFailedException(peer, "rank " + rank + " on " + device.where() + ": rank " + peer + " (pid "
                        + infos[peer].pid() + ") died while this rank opened its GPU window (" + e.getMessage() + ")", e);
            }
            throw e;
        }
    }

    /**
     * Each one-shot block's copy of the one-shot call count (DevCommLayout.ONE_SHOT_CALLS), read back from
     * the GPU once the work queued on the communicator's stream is done, for tests: between kernels every
     * copy holds the same number.
     */
    int[] oneShotCallCounts() {
        int[] counts = new int[DevCommLayout.MAX_CHANNELS];
        DeviceBuffer.copyDeviceToArray(counts, channelState.address() + DevCommLayout.STATES_ONE_SHOT_CALLS,
                4L * counts.length, stream, where);
        return counts;
    }

    /**
     * The kernel's view of the rings and of the one-shot inboxes (DevCommLayout), written once to device
     * memory. Channel c receives in {@code recvWindows[c]} and sends into {@code sendWindows[c]}; abort
     * words are those of channel 0's windows, so an abort travels round channel 0's ring.
     */
    private void writeDevComm(SegmentLayout layout, long[] recvWindows, long[] sendWindows, int channels,
                              long inboxBytes, long[] inboxes) {
        ChannelLayout ch = layout.channel();
        channelState = own(DeviceBuffer.allocate(device, DevCommLayout.STATES_BYTES, "rank " + rank));
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
        b.putLong(DevCommLayout.BLOCKS_DONE, channelState.address() + DevCommLayout.STATES_BLOCKS_DONE);
        b.putLong(DevCommLayout.ONE_SHOT_CALLS, channelState.address() + DevCommLayout.STATES_ONE_SHOT_CALLS);
        // DevCommLayout.CALLS: the kernels' call counters, zero to begin with (this buffer's zeros).
        if (params.get(Params.PROBE)) {
            probes = own(new GpuProbes(device, stream, "rank " + rank));
            b.putLong(DevCommLayout.PROBE, probes.address());
        }
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
}
