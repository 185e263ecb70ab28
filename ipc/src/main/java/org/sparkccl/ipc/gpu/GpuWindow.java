package org.sparkccl.ipc.gpu;

import java.io.IOException;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.agrona.concurrent.UnsafeBuffer;
import org.sparkccl.core.CclException;
import org.sparkccl.core.jdk.JdkAccess;
import org.sparkccl.core.log.CclLog;
import org.sparkccl.core.log.Subsys;
import org.sparkccl.core.os.DescriptorServer;
import org.sparkccl.core.os.LibC;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.proto.SegmentLayout;
import org.sparkccl.core.transport.ExposedRegion;
import org.sparkccl.core.transport.HostIdentity;

import org.sparkccl.ipc.cuda.CudaDevice;
import org.sparkccl.ipc.cuda.CudaStream;
import org.sparkccl.ipc.cuda.DeviceBuffer;
import org.sparkccl.ipc.cuda.GpuSupport;
import org.sparkccl.ipc.cuda.HostRegistration;
import org.sparkccl.ipc.cuda.IpcMemory;
import org.sparkccl.ipc.cuda.ShareableDeviceMemory;
import org.sparkccl.core.shm.ShmTransport;

/**
 * One of this rank's receive windows, laid out as the CPU engine's segment ({@link SegmentLayout}):
 * either device memory (for a predecessor that reaches this GPU peer-to-peer) or a /dev/shm segment
 * registered with the GPU (the host-staged path). Both are made before the bootstrap round, since
 * which one the predecessor uses is known only after it; the unused one is closed right after.
 */
abstract class GpuWindow implements AutoCloseable {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    private static final SecureRandom RANDOM = new SecureRandom();

    final long bytes;
    final byte[] secret = new byte[16];

    GpuWindow(long bytes) {
        this.bytes = bytes;
        RANDOM.nextBytes(secret);
    }

    /** The window's base as kernels on this rank's GPU address it. */
    abstract long kernelAddress();

    /** The blob a peer opens this window with. */
    abstract byte[] connectBlob(int rank, int size, byte[] hostHash, CudaDevice device);

    @Override
    public abstract void close();

    /** The control block every window starts with: CPU engine's magic, version, state, pid, then secret. */
    byte[] controlBlock() {
        UnsafeBuffer b = new UnsafeBuffer(new byte[SegmentLayout.CONTROL_BYTES]);
        b.putLong(SegmentLayout.MAGIC_OFFSET, SegmentLayout.MAGIC);
        b.putInt(SegmentLayout.VERSION_OFFSET, SegmentLayout.VERSION);
        b.putInt(SegmentLayout.STATE_OFFSET, SegmentLayout.STATE_RUNNING);
        b.putLong(SegmentLayout.PID_OFFSET, HostIdentity.pid());
        b.putBytes(DevCommLayout.WINDOW_SECRET, secret);
        return b.byteArray();
    }

    /**
     * Device memory that peer processes map: CUDA virtual memory shared as a file descriptor (a
     * {@link DescriptorServer} hands it to peers that present the window's secret), or, where the GPU
     * cannot share memory that way or SPARKCCL_CUMEM_ENABLE=0, memory from cuMemAlloc exported through
     * CUDA IPC. Peers in this process use the raw pointer either way.
     *
     * <p>Why the descriptor is preferred: a peer that imports it holds the memory itself, so when this
     * process dies the peer's kernel still reading the window finds stale data (and then the abort the
     * host raises), by CUDA's documented rules rather than by whatever the driver does with a dead
     * process's IPC exports (GpuWindowOwnerDiesTest checks it on the GPU).
     *
     * <p>A predecessor rank of this process writes into the window through the raw pointer (its
     * kernel raises this rank's abort word even after this rank is done, when the predecessor fails
     * later). So the memory is freed only when the owner and every such peer have let go of it:
     * otherwise a late abort would write into whatever the allocator handed out next. (A peer process
     * holds its own mapping, which stays valid until it is closed.)
     */
    static final class Device extends GpuWindow {
        private static final Map<Long, Device> IN_PROCESS = new HashMap<>();

        private final CudaDevice device;
        private final String where;
        private final long address;
        /** The memory: a ShareableDeviceMemory (shared by descriptor) or a DeviceBuffer (shared through IPC). */
        private final AutoCloseable memory;
        /** Shared by descriptor: the exported descriptor and the server that hands it out; else -1 and null. */
        private final int descriptor;
        private final DescriptorServer server;
        private final long allocationBytes;
        private int holders = 1; // guarded by IN_PROCESS
        private boolean ownerClosed; // guarded by IN_PROCESS

        /**
         * The device window of {@code owner} (e.g. "rank 3"): shared by descriptor where this GPU supports
         * it and SPARKCCL_CUMEM_ENABLE is not 0, else through CUDA IPC; logs which (INFO, P2P).
         */
        static Device create(CudaDevice device, long bytes, CudaStream stream, String owner, Params params, CclLog log) {
            String ipcBecause = params.get(Params.CUMEM_ENABLE) ? ShareableDeviceMemory.unavailableReason(device)
                    : "SPARKCCL_CUMEM_ENABLE=0";
            Device window;
            if (ipcBecause == null) {
                ShareableDeviceMemory memory = ShareableDeviceMemory.allocate(device, bytes, peersReaching(device), owner);
                window = new Device(device, bytes, stream, owner, memory, memory.address(), memory.size());
                log.info(Subsys.P2P, "%s's P2P window: %d bytes of CUDA virtual memory (cuMemCreate, %d allocated), "
                        + "handed to peer processes as a file descriptor over %s", owner, bytes, memory.size(),
                        window.server.name());
            } else {
                DeviceBuffer buffer = DeviceBuffer.allocate(device, bytes, owner);
                window = new Device(device, bytes, stream, owner, buffer, buffer.address(), 0);
                log.info(Subsys.P2P, "%s's P2P window: %d bytes shared with peer processes through CUDA IPC "
                        + "(cuIpcGetMemHandle), not as CUDA virtual memory: %s", owner, bytes, ipcBecause);
            }
            return window;
        }

        /** The other GPUs of this process whose kernels reach {@code device} peer-to-peer (same-process peers). */
        private static List<CudaDevice> peersReaching(CudaDevice device) {
            List<CudaDevice> peers = new ArrayList<>();
            for (int i = 0; i < GpuSupport.deviceCount(); i++) {
                CudaDevice other = CudaDevice.get(i);
                if (other != device && other.canAccessPeer(device)) {
                    peers.add(other);
                }
            }
            return peers;
        }

        /** Takes {@code memory} (closed here if anything fails); allocationBytes > 0: shared by descriptor. */
        private Device(CudaDevice device, long bytes, CudaStream stream, String owner, AutoCloseable memory, long address,
                       long allocationBytes) {
            super(bytes);
            this.device = device;
            this.where = device.where() + ", " + owner;
            this.memory = memory;
            this.address = address;
            this.allocationBytes = allocationBytes;
            int fd = -1;
            DescriptorServer serving = null;
            try {
                DeviceBuffer.fill(address, bytes, (byte) 0, stream, where);
                byte[] control = controlBlock();
                DeviceBuffer.copyArrayToDevice(address, control, control.length, stream, where);
                if (memory instanceof ShareableDeviceMemory) {
                    fd = ((ShareableDeviceMemory) memory).exportDescriptor();
                    serving = DescriptorServer.start(fd, secret, owner + "'s GPU window");
                }
            } catch (IOException | RuntimeException e) {
                closeDescriptor(fd);
                closeQuietly(memory, e);
                throw e instanceof RuntimeException ? (RuntimeException) e : new CclException(where + ": cannot hand "
                        + "its GPU window to peer processes (" + e.getMessage() + "); set SPARKCCL_CUMEM_ENABLE=0 to "
                        + "share it through CUDA IPC instead", e);
            }
            this.descriptor = fd;
            this.server = serving;
            synchronized (IN_PROCESS) {
                IN_PROCESS.put(address, this);
            }
        }

        /**
         * The window of a rank of this process at {@code address}, held until the returned handle is
         * closed; null when there is none (the owner already closed it, or the blob is stale).
         */
        static Runnable holdInProcess(long address, byte[] secret) {
            synchronized (IN_PROCESS) {
                Device window = IN_PROCESS.get(address);
                if (window == null || !java.util.Arrays.equals(window.secret, secret)) {
                    return null;
                }
                window.holders++;
                boolean[] released = new boolean[1];
                return () -> {
                    synchronized (IN_PROCESS) {
                        if (!released[0]) {
                            released[0] = true;
                            window.release();
                        }
                    }
                };
            }
        }

        // Called with IN_PROCESS held.
        private void release() {
            if (--holders == 0) {
                IN_PROCESS.remove(address);
                if (server != null) {
                    server.close(); // peers asking from now on find nobody
                }
                closeDescriptor(descriptor);
                try {
                    memory.close();
                } catch (RuntimeException e) {
                    throw e;
                } catch (Exception e) {
                    throw new CclException(where + ": freeing the GPU window failed: " + e, e);
                }
            }
        }

        @Override
        long kernelAddress() {
            return address;
        }

        @Override
        byte[] connectBlob(int rank, int size, byte[] hostHash, CudaDevice dev) {
            if (server != null) {
                return new GpuConnectBlob(GpuConnectBlob.KIND_DEVICE_FD, rank, size, hostHash, HostIdentity.pid(),
                        device.uuid(), device.pciBusId(), 0, bytes, secret, new byte[IpcMemory.HANDLE_BYTES], address,
                        server.socketId(), allocationBytes).encode();
            }
            long[] range = IpcMemory.allocationRange(device, address, where);
            byte[] handle = IpcMemory.exportHandle(device, range[0], where);
            return new GpuConnectBlob(GpuConnectBlob.KIND_DEVICE, rank, size, hostHash, HostIdentity.pid(), device.uuid(),
                    device.pciBusId(), address - range[0], bytes, secret, handle, address).encode();
        }

        @Override
        public void close() {
            synchronized (IN_PROCESS) {
                if (!ownerClosed) {
                    ownerClosed = true;
                    release();
                }
            }
        }

        private static void closeDescriptor(int fd) {
            if (fd >= 0) {
                LibC.close(fd);
            }
        }

        private static void closeQuietly(AutoCloseable memory, Exception cause) {
            try {
                memory.close();
            } catch (Exception e) {
                cause.addSuppressed(e);
            }
        }
    }

    /** A /dev/shm segment (ShmTransport) registered with this rank's GPU. */
    static final class Host extends GpuWindow {
        private final ExposedRegion region;
        private final HostRegistration registration;

        Host(ShmTransport shm, CudaDevice device, long bytes, String owner) {
            super(bytes);
            this.region = shm.expose(bytes, "GPU staging window of " + owner);
            try {
                byte[] control = controlBlock();
                region.buffer().putBytes(0, control);
                this.registration = HostRegistration.register(device, region.address(), bytes, owner);
            } catch (RuntimeException e) {
                region.close();
                throw e;
            }
        }

        @Override
        long kernelAddress() {
            return registration.devicePointer();
        }

        byte[] shmBlob() {
            return region.connectBlob();
        }

        @Override
        byte[] connectBlob(int rank, int size, byte[] hostHash, CudaDevice device) {
            return new GpuConnectBlob(GpuConnectBlob.KIND_HOST, rank, size, hostHash, HostIdentity.pid(), device.uuid(),
                    device.pciBusId(), 0, bytes, secret, new byte[IpcMemory.HANDLE_BYTES], region.address()).encode();
        }

        /** Removes the /dev/shm name once the predecessor has it mapped. */
        void unlinkName() {
            region.unlinkName();
        }

        @Override
        public void close() {
            try {
                registration.close();
            } finally {
                region.close();
            }
        }
    }

    static String hex(long v) {
        return "0x" + Long.toHexString(v);
    }

    static void checkSecret(byte[] seen, byte[] expected, String what) {
        if (!java.util.Arrays.equals(seen, expected)) {
            throw new IllegalStateException(what + " does not hold the secret its connect blob names: the blob is stale "
                    + "(from an earlier attempt) or belongs to another communicator");
        }
    }

}
