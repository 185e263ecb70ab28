package org.sparkccl.ipc.cuda;

import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.Map;
import java.util.Set;
import jcuda.driver.CUcontext;
import jcuda.driver.CUdevice;
import jcuda.driver.CUdevice_P2PAttribute;
import jcuda.driver.CUdevice_attribute;
import jcuda.driver.CUresult;
import jcuda.driver.CUuuid;
import jcuda.driver.JCudaDriver;

/**
 * One visible GPU and its primary context, which every rank of this process on that GPU shares (so
 * that pointers, modules and peer access are shared as they are with the CUDA runtime). Process-wide
 * and never released: the primary context lives as long as the process.
 */
public final class CudaDevice {
    private static final Map<Integer, CudaDevice> DEVICES = new HashMap<>();

    private final int ordinal;
    private final CUdevice device;
    private final CUcontext context;
    private final String name;
    private final byte[] uuid;
    private final String pciBusId;
    private final int computeCapability;
    private final Set<Integer> peersEnabled = new HashSet<>();

    private CudaDevice(int ordinal) {
        this.ordinal = ordinal;
        String where = "GPU " + ordinal;
        this.device = new CUdevice();
        Cuda.check(JCudaDriver.cuDeviceGet(device, ordinal), "cuDeviceGet(" + ordinal + ")", where);
        byte[] nameBytes = new byte[256];
        Cuda.check(JCudaDriver.cuDeviceGetName(nameBytes, nameBytes.length, device), "cuDeviceGetName", where);
        int len = 0;
        while (len < nameBytes.length && nameBytes[len] != 0) {
            len++;
        }
        this.name = new String(nameBytes, 0, len, java.nio.charset.StandardCharsets.US_ASCII);
        CUuuid u = new CUuuid();
        Cuda.check(JCudaDriver.cuDeviceGetUuid(u, device), "cuDeviceGetUuid", where);
        this.uuid = Arrays.copyOf(u.bytes, 16);
        String[] bus = new String[1];
        Cuda.check(JCudaDriver.cuDeviceGetPCIBusId(bus, 64, device), "cuDeviceGetPCIBusId", where);
        this.pciBusId = bus[0].trim().toLowerCase(java.util.Locale.ROOT);
        this.computeCapability = attribute(CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) * 10
                + attribute(CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
        this.context = new CUcontext();
        Cuda.check(JCudaDriver.cuDevicePrimaryCtxRetain(context, device), "cuDevicePrimaryCtxRetain", where());
    }

    /** The device with this ordinal (as CUDA numbers them in this process). */
    public static synchronized CudaDevice get(int ordinal) {
        GpuSupport.require();
        int count = GpuSupport.deviceCount();
        if (ordinal < 0 || ordinal >= count) {
            throw new IllegalArgumentException("GPU " + ordinal + " does not exist: this process sees " + count
                    + " GPU(s), numbered 0 to " + (count - 1));
        }
        return DEVICES.computeIfAbsent(ordinal, CudaDevice::new);
    }

    /** The visible device with this UUID, or null. */
    public static CudaDevice byUuid(byte[] uuid) {
        for (int i = 0; i < GpuSupport.deviceCount(); i++) {
            CudaDevice d = get(i);
            if (Arrays.equals(d.uuid, uuid)) {
                return d;
            }
        }
        return null;
    }

    /** Makes this device's primary context current on the calling thread; cheap, call before any CUDA work. */
    public void makeCurrent() {
        // Every collective call makes its device current: the message is made only when it fails.
        int rc = JCudaDriver.cuCtxSetCurrent(context);
        if (rc != CUresult.CUDA_SUCCESS) {
            Cuda.check(rc, "cuCtxSetCurrent", where());
        }
    }

    /** True when kernels on this device can read and write memory of {@code other} (the same device counts). */
    public boolean canAccessPeer(CudaDevice other) {
        if (other == this) {
            return true;
        }
        int[] can = new int[1];
        Cuda.check(JCudaDriver.cuDeviceCanAccessPeer(can, device, other.device), "cuDeviceCanAccessPeer", where());
        return can[0] != 0;
    }

    /**
     * CUDA's relative performance rank of the peer-to-peer link to {@code other} (lower is better; 0 for
     * this device itself); -1 where the two have no P2P link or CUDA does not say.
     */
    public int p2pPerformanceRank(CudaDevice other) {
        if (other == this) {
            return 0;
        }
        int[] rank = new int[1];
        int rc = JCudaDriver.cuDeviceGetP2PAttribute(rank, CUdevice_P2PAttribute.CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK,
                device, other.device);
        return rc == CUresult.CUDA_SUCCESS ? rank[0] : -1;
    }

    /**
     * True when this GPU reaches {@code other} over NVLink. CUDA names no link kind; it reports native
     * peer atomics, which it offers over NVLink only (over PCIe a peer atomic is a read then a write:
     * CUDA programming guide, atomic functions), so that attribute tells the two apart without NVML.
     */
    public boolean nvLinkTo(CudaDevice other) {
        if (other == this || !canAccessPeer(other)) {
            return false;
        }
        int[] atomics = new int[1];
        Cuda.check(JCudaDriver.cuDeviceGetP2PAttribute(atomics,
                CUdevice_P2PAttribute.CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED, device, other.device),
                "cuDeviceGetP2PAttribute(native atomics, to GPU " + other.ordinal + ")", where());
        return atomics[0] != 0;
    }

    /** Lets kernels of this context use pointers into {@code peer}'s memory (same-process peers). */
    public synchronized void enablePeerAccess(CudaDevice peer) {
        if (peer == this || peersEnabled.contains(peer.ordinal)) {
            return;
        }
        makeCurrent();
        int rc = JCudaDriver.cuCtxEnablePeerAccess(peer.context, 0);
        if (rc != CUresult.CUDA_SUCCESS && rc != CUresult.CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) {
            Cuda.check(rc, "cuCtxEnablePeerAccess(to GPU " + peer.ordinal + ")", where());
        }
        peersEnabled.add(peer.ordinal);
    }

    public int attribute(int attribute) {
        int[] v = new int[1];
        Cuda.check(JCudaDriver.cuDeviceGetAttribute(v, attribute, device), "cuDeviceGetAttribute(" + attribute + ")",
                "GPU " + ordinal);
        return v[0];
    }

    public int ordinal() {
        return ordinal;
    }

    /** Bytes of this GPU's memory in use by every process ({@code cuMemGetInfo}: total minus free). */
    public long usedBytes() {
        makeCurrent();
        long[] free = new long[1];
        long[] total = new long[1];
        Cuda.check(JCudaDriver.cuMemGetInfo(free, total), "cuMemGetInfo", where());
        return total[0] - free[0];
    }

    public String name() {
        return name;
    }

    public byte[] uuid() {
        return uuid.clone();
    }

    public String uuidString() {
        return "GPU-" + HexFormat.of().formatHex(uuid);
    }

    /** E.g. {@code 0000:19:00.0}. */
    public String pciBusId() {
        return pciBusId;
    }

    /** E.g. 90 for sm_90. */
    public int computeCapability() {
        return computeCapability;
    }

    public int multiprocessors() {
        return attribute(CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    }

    CUcontext context() {
        return context;
    }

    /** For messages: {@code GPU 0 (NVIDIA H200, 0000:19:00.0)}. */
    public String where() {
        return "GPU " + ordinal + " (" + name + ", " + pciBusId + ")";
    }

    @Override
    public String toString() {
        return where();
    }
}
