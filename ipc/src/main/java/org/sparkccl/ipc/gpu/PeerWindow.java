package org.sparkccl.ipc.gpu;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.security.SecureRandom;
import java.time.Duration;
import org.sparkccl.core.CclException;
import org.sparkccl.core.os.DescriptorServer;
import org.sparkccl.core.os.LibC;
import org.sparkccl.core.transport.RankInfo;
import org.sparkccl.core.transport.SharedRegion;
import org.sparkccl.ipc.cuda.CudaDevice;
import org.sparkccl.ipc.cuda.CudaStream;
import org.sparkccl.ipc.cuda.DeviceBuffer;
import org.sparkccl.ipc.cuda.HostRegistration;
import org.sparkccl.ipc.cuda.IpcMemory;
import org.sparkccl.ipc.cuda.ShareableDeviceMemory;
import org.sparkccl.core.shm.ShmTransport;

/** The successor's receive window, opened by this rank: the memory its kernel sends into. */
abstract class PeerWindow implements AutoCloseable {
    private static final SecureRandom RANDOM = new SecureRandom();

    /** The window's base as kernels on this rank's GPU address it. */
    abstract long kernelAddress();

    /**
     * How this rank reaches it, for the log: {@code P2P/CUMEM} (imported CUDA virtual memory), {@code P2P/IPC},
     * {@code P2P/direct}, {@code SHM/staged}.
     */
    abstract String via();

    @Override
    public abstract void close();

    /** Device memory of a peer in this process: its plain pointer, with peer access enabled. */
    static PeerWindow direct(CudaDevice me, GpuConnectBlob blob, CudaStream stream, String where, long probeOffset) {
        CudaDevice peer = CudaDevice.byUuid(blob.deviceUuid);
        if (peer == null) {
            throw new IllegalStateException("rank " + blob.rank + " runs in this process on " + blob.deviceUuidString()
                    + ", which this thread cannot see");
        }
        long address = blob.rawAddress;
        Runnable release = GpuWindow.Device.holdInProcess(address, blob.secret);
        if (release == null) {
            throw new IllegalStateException(where + ": rank " + blob.rank + "'s window at " + GpuWindow.hex(address)
                    + " is not open in this process (already closed, or the connect blob is stale)");
        }
        try {
            me.enablePeerAccess(peer);
            probeDevice(address, probeOffset, blob, stream, where);
        } catch (RuntimeException e) {
            release.run();
            throw e;
        }
        return new PeerWindow() {
            @Override
            long kernelAddress() {
                return address;
            }

            @Override
            String via() {
                return "P2P/direct";
            }

            /** Lets go of the peer's window, which is freed once its owner has closed it too. */
            @Override
            public void close() {
                release.run();
            }
        };
    }

    /**
     * Device memory of a peer process: imported from the file descriptor its descriptor server hands
     * over (CUDA virtual memory; this rank's mapping then holds the memory even if the peer dies), or
     * mapped through its CUDA IPC handle, as its blob says. {@code fetchTimeout} bounds the wait for the
     * descriptor.
     */
    static PeerWindow otherProcess(CudaDevice me, GpuConnectBlob blob, CudaStream stream, String where,
                                   long probeOffset, Duration fetchTimeout) {
        String opening = where + ", opening rank " + blob.rank + "'s window";
        AutoCloseable mapping;
        long base;
        String via;
        if (blob.kind == GpuConnectBlob.KIND_DEVICE_FD) {
            ShareableDeviceMemory imported = importWindow(me, blob, opening, fetchTimeout);
            mapping = imported;
            base = imported.address();
            via = "P2P/CUMEM";
        } else if (blob.kind == GpuConnectBlob.KIND_DEVICE) {
            IpcMemory ipc = IpcMemory.open(me, blob.ipcHandle, opening);
            mapping = ipc;
            base = ipc.base();
            via = "P2P/IPC";
        } else {
            throw new IllegalStateException(opening + ": its P2P connect blob describes a window of kind " + blob.kind
                    + ", not device memory");
        }
        try {
            long address = base + blob.offset;
            probeDevice(address, probeOffset, blob, stream, where);
            return new PeerWindow() {
                @Override
                long kernelAddress() {
                    return address;
                }

                @Override
                String via() {
                    return via;
                }

                /** Unmaps the peer's window; imported memory of a peer that died goes back to the GPU now. */
                @Override
                public void close() {
                    closeMapping(mapping, opening);
                }
            };
        } catch (RuntimeException e) {
            try {
                closeMapping(mapping, opening);
            } catch (RuntimeException suppressed) {
                e.addSuppressed(suppressed);
            }
            throw e;
        }
    }

    /** Fetches the window's descriptor from the peer's descriptor server and imports it; the descriptor is closed. */
    private static ShareableDeviceMemory importWindow(CudaDevice me, GpuConnectBlob blob, String opening,
                                                     Duration fetchTimeout) {
        int fd;
        try {
            fd = DescriptorServer.fetch(blob.socketId, blob.secret, fetchTimeout);
        } catch (IOException e) {
            throw new CclException(opening + ": could not get its descriptor (" + e.getMessage() + "); if the ranks "
                    + "cannot reach each other's Unix sockets (different network namespaces), set "
                    + "SPARKCCL_CUMEM_ENABLE=0 on every rank to share GPU windows through CUDA IPC", e);
        }
        try {
            return ShareableDeviceMemory.importDescriptor(me, fd, blob.allocationBytes, opening);
        } finally {
            LibC.close(fd);
        }
    }

    private static void closeMapping(AutoCloseable mapping, String opening) {
        try {
            mapping.close();
        } catch (RuntimeException e) {
            throw e;
        } catch (Exception e) {
            throw new CclException(opening + ": unmapping it failed: " + e, e);
        }
    }

    /** A peer's /dev/shm window, mapped here and registered with this rank's GPU. */
    static PeerWindow staged(CudaDevice me, ShmTransport shm, byte[] shmBlob, RankInfo owner, GpuConnectBlob blob,
                             String owner2) {
        SharedRegion region = shm.open(shmBlob, owner);
        try {
            if (region.size() < blob.windowBytes) {
                throw new IllegalStateException("rank " + blob.rank + "'s staging window has " + region.size()
                        + " bytes, its blob says " + blob.windowBytes);
            }
            byte[] seen = new byte[16];
            region.buffer().getBytes(DevCommLayout.WINDOW_SECRET, seen);
            GpuWindow.checkSecret(seen, blob.secret, "rank " + blob.rank + "'s staging window");
            HostRegistration registration = HostRegistration.register(me, region.address(), blob.windowBytes, owner2);
            return new PeerWindow() {
                @Override
                long kernelAddress() {
                    return registration.devicePointer();
                }

                @Override
                String via() {
                    return "SHM/staged";
                }

                @Override
                public void close() {
                    try {
                        registration.close();
                    } finally {
                        region.close();
                    }
                }
            };
        } catch (RuntimeException e) {
            region.close();
            throw e;
        }
    }

    /**
     * Reads the window's secret through the mapping, then writes a random word at {@code probeOffset}
     * (a word no other rank writes) and reads it back: the P2P path is used only when a real round trip
     * through it works. The word is zeroed again afterwards.
     */
    private static void probeDevice(long address, long probeOffset, GpuConnectBlob blob, CudaStream stream, String where) {
        if (probeOffset < 0 || probeOffset + 8 > blob.windowBytes) {
            throw new IllegalStateException("rank " + blob.rank + "'s window has " + blob.windowBytes
                    + " bytes, too few for the probe at " + probeOffset + " (ranks built with different settings?)");
        }
        byte[] seen = new byte[16];
        copyIn(seen, address + DevCommLayout.WINDOW_SECRET, stream, where);
        GpuWindow.checkSecret(seen, blob.secret, "rank " + blob.rank + "'s window on " + blob.deviceUuidString());
        byte[] probe = new byte[8];
        RANDOM.nextBytes(probe);
        DeviceBuffer.copyArrayToDevice(address + probeOffset, probe, 8, stream, where + " (P2P probe write)");
        byte[] back = new byte[8];
        copyIn(back, address + probeOffset, stream, where);
        DeviceBuffer.copyArrayToDevice(address + probeOffset, new byte[8], 8, stream, where + " (P2P probe reset)");
        if (!java.util.Arrays.equals(probe, back)) {
            throw new IllegalStateException("P2P probe to rank " + blob.rank + " failed on " + where + ": wrote "
                    + ByteBuffer.wrap(probe).order(ByteOrder.LITTLE_ENDIAN).getLong() + ", read back "
                    + ByteBuffer.wrap(back).order(ByteOrder.LITTLE_ENDIAN).getLong()
                    + "; set SPARKCCL_P2P_DISABLE=1 to stage through host memory instead");
        }
    }

    private static void copyIn(byte[] dst, long deviceAddress, CudaStream stream, String where) {
        DeviceBuffer.copyDeviceToArray(dst, deviceAddress, dst.length, stream, where + " (P2P probe read)");
    }
}
