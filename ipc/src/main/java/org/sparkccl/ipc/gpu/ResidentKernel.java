package org.sparkccl.ipc.gpu;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.concurrent.TimeUnit;
import jcuda.Pointer;
import jcuda.driver.CUfunction;
import jcuda.driver.JCudaDriver;
import org.agrona.concurrent.UnsafeBuffer;
import org.sparkccl.core.jdk.JdkAccess;
import org.sparkccl.ipc.cuda.Cuda;
import org.sparkccl.ipc.cuda.CudaDevice;
import org.sparkccl.ipc.cuda.CudaStream;
import org.sparkccl.ipc.cuda.KernelModule;
import org.sparkccl.ipc.cuda.PinnedHostBuffer;

/**
 * The resident one-shot kernel of one rank (resident.cuh, {@code sccl_oneshot_resident}): one block
 * that stays on the GPU between small all-reduces and takes each call from a doorbell in mapped host
 * memory, so that such a call costs no kernel launch (a JCuda launch call plus the GPU's launch latency):
 * 8 B-8 KB calls took 15.3-16.2 us against 20.6-22.2 us with a launch per call (2 x H200, same call). It ends by itself after {@link #IDLE_NS} without a call, so that a
 * {@code cuMemFree} elsewhere in the process (which waits for the whole GPU) is held at most that long,
 * and is launched again by the next call.
 *
 * <pre>
 *  doorbell (pinned, mapped host memory), one 64-byte line of four LL lines {data lo, flag, data hi, flag}
 *  whose flags are all the call's sequence number (all 0xffffffff: stop):
 *    0  send pointer
 *   16  recv pointer
 *   32  count, ticket
 *   48  type | op << 8 | proto << 16 | kind << 24, root
 *  128  exit word: 0 while the kernel runs, then 1 + the last sequence number it saw
 * </pre>
 * One PCIe read of that line by the kernel brings the sequence number and the arguments together (they
 * were two dependent reads before, the arguments 96 bytes); each 8-byte word carries the flag, so a line
 * the host is still writing never looks complete.
 * Not thread safe; owned by its communicator.
 */
final class ResidentKernel implements AutoCloseable {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    static final long IDLE_NS = TimeUnit.MILLISECONDS.toNanos(2);
    static final String KERNEL = "sccl_oneshot_resident";
    private static final int EXIT = 128;
    private static final int LINES = 4;
    private static final int STOP = 0xffffffff;
    private static final int BYTES = 256;

    private final CudaDevice device;
    private final CudaStream stream;
    private final PinnedHostBuffer doorbell;
    private final UnsafeBuffer bell;
    private final CUfunction function;
    private final ByteBuffer params = ByteBuffer.allocateDirect(32).order(ByteOrder.LITTLE_ENDIAN);
    private final Pointer kernelParams = Pointer.to(Pointer.to(params));
    private final int threads;
    /**
     * One block does the whole call, so only small all-reduces come here (SPARKCCL_RESIDENT_MAX_BYTES,
     * 32 KB by default). On 2 x H200 its kernel took 7.0-7.9 us up to 8 KB, as a launched one-shot kernel's
     * several blocks do, but 13.7 us at 32 KB (launched: 7.8), when a thread read its lines one by one. With
     * a thread's lines read 4 at a time (one H100, 2 ranks as threads, blocking calls): 32 KB 14.8 us against
     * 20.1 launched, 64 KB 23.9 against about 21.
     */
    private final long maxBytes;
    private final String where;
    private boolean running;
    private long rung;        // what the doorbell holds
    private long beforeRing;  // what it held before the call in progress was rung
    private int launches;

    ResidentKernel(CudaDevice device, KernelModule module, long devComm, int threads, long maxBytes, String where) {
        this.device = device;
        this.threads = threads;
        this.maxBytes = maxBytes;
        this.where = where;
        this.function = module.function(KERNEL);
        this.stream = new CudaStream(device, where);
        try {
            this.doorbell = PinnedHostBuffer.allocate(device, BYTES, where + " resident doorbell");
        } catch (RuntimeException e) {
            stream.close();
            throw e;
        }
        this.bell = new UnsafeBuffer(doorbell.address(), BYTES);
        bell.setMemory(0, BYTES, (byte) 0);
        params.putLong(0, devComm);
        params.putLong(8, doorbell.devicePointer());
        params.putLong(24, IDLE_NS);
    }

    /** Whether an all-reduce of {@code bytes} comes here (or to the stream-resident kernel), if it runs one-shot. */
    boolean takes(long bytes) {
        return bytes <= maxBytes;
    }

    long maxBytes() {
        return maxBytes;
    }

    /** Runs call {@code seq} (its CollArgs in {@code args}): launches the kernel if it is not running, then rings. */
    void ring(ByteBuffer args, int seq) {
        if (!running || bell.getLongVolatile(EXIT) != 0) {
            launch(rung);
        }
        putCall(bell, 0, args, seq);
        beforeRing = rung;
        rung = Integer.toUnsignedLong(seq);
    }

    /**
     * Writes the call in {@code args} (CollArgs) at {@code at} as the resident kernels read it
     * (resident.cuh, residentArgs): four LL lines - send, recv, {count, ticket}, {type | op << 8 |
     * proto << 16 | kind << 24, root} - each 8-byte word beside {@code flag}. Each 8-byte store is atomic;
     * their order does not matter (a kernel takes the lines only when all flags agree). No store is volatile:
     * the stores leave the store buffer as fast without a fence, which would only hold this thread until the
     * GPU's reads of the line (snooped from this core's cache) let them through: 0.5-1.1 us of host time per
     * call with four volatile stores (one H100, 2026-12-05).
     */
    static void putCall(UnsafeBuffer to, int at, ByteBuffer args, int flag) {
        long count = args.getLong(DevCommLayout.ARG_COUNT);
        if (count >>> 32 != 0) {
            throw new IllegalArgumentException("the resident kernels take counts below 2^32, not " + count);
        }
        int what = (args.getInt(DevCommLayout.ARG_TYPE) & 0xff) | (args.getInt(DevCommLayout.ARG_OP) & 0xff) << 8
                | (args.getInt(DevCommLayout.ARG_PROTO) & 0xff) << 16 | (args.getInt(DevCommLayout.ARG_KIND) & 0xff) << 24;
        putLine(to, at, 0, args.getLong(DevCommLayout.ARG_SEND), flag);
        putLine(to, at, 1, args.getLong(DevCommLayout.ARG_RECV), flag);
        putLine(to, at, 2, count | (long) args.getInt(DevCommLayout.ARG_TICKET) << 32, flag);
        putLine(to, at, 3, Integer.toUnsignedLong(what) | (long) args.getInt(DevCommLayout.ARG_ROOT) << 32, flag);
    }

    /** LL line {@code line} at {@code at}: the low and high halves of {@code data}, each beside {@code flag}. */
    private static void putLine(UnsafeBuffer to, int at, int line, long data, int flag) {
        long f = (long) flag << 32;
        to.putLong(at + 16 * line, (data & 0xffffffffL) | f);
        to.putLongRelease(at + 16 * line + 8, (data >>> 32) | f);
    }

    /**
     * Called while the host waits for call {@code seq}: if the kernel ended (idle) before it saw the
     * doorbell, launches it again; it then finds the call waiting. The caller has checked that the call
     * is not done yet, and reads the exit word before the done word, so a kernel that ran the call and
     * then went idle is never taken for one that missed it.
     */
    void relaunchIfMissed(UnsafeBuffer status, int seq) {
        long exit = bell.getLongVolatile(EXIT);
        // The kernel writes the done word before its exit word: an exit that saw this call (or a done word
        // read after the exit word) means the call ran; anything else means the kernel went idle first.
        if (running && exit != 0 && exit - 1 != rung && status.getIntVolatile(DevCommLayout.STATUS_DONE_SEQ) != seq) {
            launch(beforeRing);
        }
    }

    /** The stream the kernel runs on (idle once it has ended). */
    CudaStream stream() {
        return stream;
    }

    int launches() {
        return launches;
    }

    private void launch(long lastSeq) {
        // The previous instance has ended (exit word set): wait for it to leave the stream, then restart.
        bell.putLongVolatile(EXIT, 0);
        params.putLong(16, lastSeq);
        Cuda.check(JCudaDriver.cuLaunchKernel(function, 1, 1, 1, threads, 1, 1, 0, stream.handle(), kernelParams, null),
                "cuLaunchKernel(" + KERNEL + ")", where);
        running = true;
        launches++;
    }

    /**
     * Asks the kernel to stop and waits for it to end, then frees the doorbell. Calls are synchronous, so
     * the kernel is idle here and sees the stop word at its next poll.
     */
    @Override
    public void close() {
        try {
            if (running) {
                for (int line = 0; line < LINES; line++) {
                    putLine(bell, 0, line, 0, STOP);
                }
                stream.synchronize();
            }
        } finally {
            running = false;
            try {
                doorbell.close();
            } finally {
                stream.close();
            }
        }
    }

    @Override
    public String toString() {
        return "resident one-shot kernel on " + device.where();
    }
}
