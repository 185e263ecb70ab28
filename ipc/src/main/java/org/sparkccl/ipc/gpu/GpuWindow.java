package org.sparkccl.ipc.gpu;

import java.security.SecureRandom;
import org.agrona.concurrent.UnsafeBuffer;
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

    /** Device memory, exported through CUDA IPC (or its raw pointer, for peers in this process). */
    static final class Device extends GpuWindow {
        private final DeviceBuffer buffer;
        private final CudaDevice device;
        private final String where;

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
            buffer.close();
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
