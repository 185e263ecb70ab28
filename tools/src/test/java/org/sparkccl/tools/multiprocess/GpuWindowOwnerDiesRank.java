package org.sparkccl.tools.multiprocess;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.sparkccl.core.Bootstrap;
import org.sparkccl.core.os.DescriptorServer;
import org.sparkccl.core.os.LibC;
import org.sparkccl.core.transport.HostIdentity;
import org.sparkccl.ipc.cuda.CudaDevice;
import org.sparkccl.ipc.cuda.CudaStream;
import org.sparkccl.ipc.cuda.DeviceBuffer;
import org.sparkccl.ipc.cuda.ShareableDeviceMemory;
import org.sparkccl.tools.launch.LaunchedRank;

/**
 * One rank of {@link GpuWindowOwnerDiesTest}. Rank 1 (the owner) allocates shareable device memory,
 * fills it with random bytes, serves its descriptor and sends the server's name, the secret and its pid
 * to rank 0, waits until rank 0 has mapped it, and SIGKILLs itself. Rank 0 (the survivor) imports the
 * memory, waits for the owner's death, reads the memory back (it must still hold the owner's bytes: the
 * import holds it), then closes its import and prints {@code HELD <bytes in use before close> <after>}:
 * the owner's allocation must go back to the GPU then.
 */
public final class GpuWindowOwnerDiesRank {
    static final long BYTES = 64L << 20;

    private GpuWindowOwnerDiesRank() {
    }

    public static void main(String[] args) throws Exception {
        LaunchedRank me = LaunchedRank.fromEnvironment();
        CudaDevice device = CudaDevice.get(0);
        CudaStream stream = new CudaStream(device, "rank " + me.rank());
        byte[] expected = new byte[(int) BYTES];
        new Random(42).nextBytes(expected);
        try (Bootstrap bootstrap = me.bootstrap(Duration.ofSeconds(60))) {
            if (me.rank() == 1) {
                own(bootstrap, device, stream, expected);
            } else {
                survive(bootstrap, device, stream, expected);
            }
        }
    }

    private static void own(Bootstrap bootstrap, CudaDevice device, CudaStream stream, byte[] expected)
            throws Exception {
        ShareableDeviceMemory memory = ShareableDeviceMemory.allocate(device, BYTES, List.of(), "owner");
        DeviceBuffer.copyArrayToDevice(memory.address(), expected, BYTES, stream, "owner");
        int fd = memory.exportDescriptor();
        byte[] secret = new byte[DescriptorServer.SECRET_BYTES];
        new Random().nextBytes(secret);
        DescriptorServer server = DescriptorServer.start(fd, secret, "the owner's memory");
        ByteBuffer offer = ByteBuffer.allocate(16 + 16 + 8 + 8);
        offer.put(server.socketId()).put(secret).putLong(memory.size()).putLong(HostIdentity.pid());
        bootstrap.allGather(offer.array());
        bootstrap.barrier(); // the survivor has it mapped
        Thread.sleep(300); // let the barrier's last bytes reach the survivor
        System.out.println("OWNER dies with its memory, server and descriptor open");
        System.out.flush();
        new ProcessBuilder("kill", "-9", Long.toString(HostIdentity.pid())).start().waitFor();
    }

    private static void survive(Bootstrap bootstrap, CudaDevice device, CudaStream stream, byte[] expected)
            throws Exception {
        ByteBuffer offer = ByteBuffer.wrap(bootstrap.allGather(new byte[48])[1]);
        byte[] socketId = new byte[16];
        byte[] secret = new byte[16];
        offer.get(socketId).get(secret);
        long size = offer.getLong();
        long ownerPid = offer.getLong();
        int fd = DescriptorServer.fetch(socketId, secret, Duration.ofSeconds(10));
        ShareableDeviceMemory imported;
        try {
            imported = ShareableDeviceMemory.importDescriptor(device, fd, size, "survivor");
        } finally {
            LibC.close(fd);
        }
        bootstrap.barrier();
        long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        while (HostIdentity.isAlive(ownerPid) && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
        if (HostIdentity.isAlive(ownerPid)) {
            throw new AssertionError("the owner (pid " + ownerPid + ") did not die");
        }
        Thread.sleep(1000); // the driver tears the owner's context down
        byte[] seen = new byte[(int) BYTES];
        DeviceBuffer.copyDeviceToArray(seen, imported.address(), BYTES, stream, "survivor");
        if (!Arrays.equals(seen, expected)) {
            throw new AssertionError("the imported memory no longer holds the owner's bytes after its death");
        }
        System.out.println("READ the owner's " + BYTES + " bytes intact after its death");
        long before = device.usedBytes();
        imported.close();
        Thread.sleep(500);
        long after = device.usedBytes();
        System.out.println("HELD " + before + " " + after + " mapped " + ShareableDeviceMemory.importedBytes());
        stream.close();
    }
}
