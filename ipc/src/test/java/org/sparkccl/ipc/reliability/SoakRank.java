package org.sparkccl.ipc.reliability;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.zip.CRC32C;
import org.agrona.BufferUtil;
import org.agrona.UnsafeApi;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.DataType;
import org.sparkccl.core.HostStagingBuffer;
import org.sparkccl.core.JdkAccess;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.SharedBuffer;
import org.sparkccl.core.TcpBootstrap;
import org.sparkccl.core.check.ReferenceCheck;
import org.sparkccl.core.param.Params;
import org.sparkccl.ipc.Communicators;
import org.sparkccl.ipc.launch.LaunchedRank;
import org.sparkccl.ipc.shm.ShmTransport;

/**
 * One rank of {@link SoakTest}: {@code SoakRank SEED CALLS SAMPLE_EVERY}. Runs CALLS collectives of
 * random kind, size, type, op and communicator (auto, ring LL, ring Simple, one-shot, and direct on
 * shared buffers), the same sequence on every rank (drawn from SEED), and checks each result against
 * the float64 reference. It prints:
 * <ul>
 *   <li>{@code SAMPLE <calls> fds <n> mappings <n> threads <n> new since the first: [..]} every
 *       SAMPLE_EVERY calls;</li>
 *   <li>{@code DIGEST <crc>}: CRC32C of every result byte (reduce-scatters aside: their blocks differ by
 *       design), equal on every rank when the results are;</li>
 *   <li>{@code LEFT <staging bytes> <mapped shm bytes>} after closing everything: both must be 0;</li>
 *   <li>{@code WRONG <what>} and exit 1 on the first wrong result.</li>
 * </ul>
 */
public final class SoakRank {
    private static final int MAX_COUNT = 1 << 18;
    private static final String[][] SETTINGS = {
        {"auto", "auto"}, {"Ring", "LL"}, {"Ring", "Simple"}, {"OneShot", "auto"}, {"Direct", "auto"}};

    private SoakRank() {
    }

    public static void main(String[] args) throws Exception {
        JdkAccess.ensureAgronaAccess();
        Random random = new Random(Long.parseLong(args[0]));
        int calls = Integer.parseInt(args[1]);
        int sampleEvery = Integer.parseInt(args[2]);
        LaunchedRank me = LaunchedRank.fromEnvironment();
        CRC32C digest = new CRC32C();
        try (TcpBootstrap bootstrap = me.bootstrap(Duration.ofMinutes(2))) {
            List<Communicator> comms = new ArrayList<>();
            for (String[] s : SETTINGS) {
                comms.add(Communicators.host(bootstrap, Params.fromEnvironment().withOverrides(
                        Map.of("SPARKCCL_ALGO", s[0], "SPARKCCL_PROTO", s[1]))));
            }
            int n = bootstrap.size();
            int rank = bootstrap.rank();
            long bytes = 8L * MAX_COUNT * n;
            ByteBuffer plain = BufferUtil.allocateDirectAligned((int) (2 * bytes), 64);
            SharedBuffer shared = comms.get(SETTINGS.length - 1).allocateShared(2 * bytes);
            byte[] copy = new byte[(int) bytes];
            ProcessResources firstSample = null;
            for (int call = 1; call <= calls; call++) {
                int which = random.nextInt(comms.size());
                Communicator comm = comms.get(which);
                long base = which == SETTINGS.length - 1 ? shared.address() : BufferUtil.address(plain);
                DataType type = DataType.values()[random.nextInt(DataType.values().length)];
                ReduceOp op = ReduceOp.values()[random.nextInt(ReduceOp.values().length)];
                // Log-uniform sizes: as many small calls (LL, one-shot) as large ones (Simple, direct).
                long count = 1 + (long) Math.pow(MAX_COUNT, random.nextDouble());
                int kind = which == SETTINGS.length - 1 ? 0 : random.nextInt(4);
                int root = random.nextInt(n);
                String what = "call " + call + ": " + SETTINGS[which][0] + "/" + SETTINGS[which][1] + " kind " + kind
                        + " count " + count + " " + type + " " + op + " root " + root + " on rank " + rank;
                ReferenceCheck check = new ReferenceCheck(type, op, n, call);
                long send = base;
                long recv = base + bytes;
                long resultBytes; // of the result, which the digest covers
                ReferenceCheck.Result result;
                switch (kind) {
                    case 0: // allReduce, in place half the time
                        if (random.nextBoolean()) {
                            recv = send;
                        }
                        check.fillInput(rank, send, 0, count);
                        comm.allReduce(send, recv, count, type, op);
                        result = check.checkReduced(recv, 0, count);
                        resultBytes = count * type.size();
                        break;
                    case 1: // reduceScatter: rank r gets the reduction of block r
                        check.fillInput(rank, send, 0, count * n);
                        comm.reduceScatter(send, recv, count, type, op);
                        result = check.checkReduced(recv, rank * count, count);
                        resultBytes = count * type.size();
                        break;
                    case 2: // allGather: block r is rank r's input
                        check.fillInput(rank, send, 0, count);
                        comm.allGather(send, recv, count, type);
                        result = new ReferenceCheck.Result(0, null);
                        for (int r = 0; r < n && result.wrong() == 0; r++) {
                            result = check.checkCopy(r, recv + r * count * type.size(), 0, count);
                        }
                        resultBytes = n * count * type.size();
                        break;
                    default: // broadcast from root
                        check.fillInput(rank, send, 0, count);
                        comm.broadcast(send, recv, count, type, root);
                        result = check.checkCopy(root, recv, 0, count);
                        resultBytes = count * type.size();
                        break;
                }
                if (result.wrong() != 0) {
                    System.out.println("WRONG " + what + ": " + result);
                    System.out.flush();
                    System.exit(1);
                }
                if (kind != 1) { // a reduce-scatter's block differs from rank to rank by design
                    UnsafeApi.copyMemory(null, recv, copy, UnsafeApi.arrayBaseOffset(byte[].class), resultBytes);
                    digest.update(copy, 0, (int) resultBytes);
                }
                if (call % sampleEvery == 0) {
                    ProcessResources now = ProcessResources.now();
                    firstSample = firstSample == null ? now : firstSample;
                    System.out.println("SAMPLE " + call + " " + now + " new since the first: " + now.newSince(firstSample));
                }
            }
            shared.close();
            for (Communicator comm : comms) {
                comm.close();
            }
        }
        System.out.println("DIGEST " + Long.toHexString(digest.getValue()));
        System.out.println("LEFT " + HostStagingBuffer.outstandingBytes() + " " + ShmTransport.mappedBytesInJvm());
        System.out.flush();
        System.exit(0);
    }
}
