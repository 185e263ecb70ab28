package org.sparkccl.ipc.gpu;

import java.security.SecureRandom;
import java.util.HashMap;
import java.util.Map;
import org.agrona.concurrent.UnsafeBuffer;
import org.sparkccl.core.JdkAccess;
import org.sparkccl.core.proto.SegmentLayout;
import org.sparkccl.core.transport.ExposedRegion;
import org.sparkccl.core.transport.HostIdentity;

import org.sparkccl.ipc.cuda.CudaDevice;
import org.sparkccl.ipc.cuda.CudaStream;
import org.sparkccl.ipc.cuda.DeviceBuffer;
import org.sparkccl.ipc.cuda.HostRegistration;
import org.sparkccl.ipc.cuda.IpcMemory;
import org.sparkccl.ipc.shm.ShmTransport;

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
     * Device memory, exported through CUDA IPC (or its raw pointer, for peers in this process).
     *
     * <p>A predecessor rank of this process writes into the window through the raw pointer (its
     * kernel raises this rank's abort word even after this rank is done, when the predecessor fails
     * later). So the memory is freed only when the owner and every such peer have let go of it:
     * otherwise a late abort would write into whatever the allocator handed out next. (A peer process
     * holds its own IPC mapping, which CUDA keeps valid until it is closed.)
     */
    static final class Device extends GpuWindow {
        private static final Map<Long, Device> IN_PROCESS = new HashMap<>();

        private final DeviceBuffer buffer;
        private final CudaDevice device;
        private final String where;
        private int holders = 1; // guarded by IN_PROCESS
        private boolean ownerClosed; // guarded by IN_PROCESS

        Device(CudaDevice device, long bytes, CudaStream stream, String owner) {
            super(bytes);
            this.device = device;
            this.where = device.where() + ", " + owner;
            this.buffer = DeviceBuffer.allocate(device, bytes, owner);
            try {
                buffer.fill((byte) 0, stream);
                byte[] control = controlBlock();
                buffer.copyFromArray(control, control.length, stream);
            } catch (RuntimeException e) {
                buffer.close();
                throw e;
            }
            synchronized (IN_PROCESS) {
                IN_PROCESS.put(buffer.address(), this);
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
                IN_PROCESS.remove(buffer.address());
                buffer.close();
            }
        }

        @Override
        long kernelAddress() {
            return buffer.address();
        }

        @Override
        byte[] connectBlob(int rank, int size, byte[] hostHash, CudaDevice dev) {
            long[] range = IpcMemory.allocationRange(device, buffer.address(), where);
            byte[] handle = IpcMemory.exportHandle(device, range[0], where);
            return new GpuConnectBlob(GpuConnectBlob.KIND_DEVICE, rank, size, hostHash, HostIdentity.pid(), device.uuid(),
                    device.pciBusId(), buffer.address() - range[0], bytes, secret, handle, buffer.address()).encode();
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
