package org.sparkccl.ipc.gpu;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.function.BooleanSupplier;
import jcuda.Pointer;
import jcuda.driver.CUfunction;
import jcuda.driver.JCudaDriver;
import org.agrona.concurrent.UnsafeBuffer;
import org.sparkccl.core.CclException;
import org.sparkccl.core.jdk.JdkAccess;
import org.sparkccl.ipc.cuda.Cuda;
import org.sparkccl.ipc.cuda.CudaDevice;
import org.sparkccl.ipc.cuda.CudaStream;
import org.sparkccl.ipc.cuda.DeviceBuffer;
import org.sparkccl.ipc.cuda.KernelModule;
import org.sparkccl.ipc.cuda.PinnedHostBuffer;
import org.sparkccl.ipc.cuda.StreamMemOps;

/**
 * The stream-resident one-shot kernel of one rank (resident.cuh, {@code sccl_stream_resident}): one block
 * that stays on the GPU and takes small stream-ordered all-reduces from the caller's stream, so that
 * such a call costs one driver call of about a microsecond instead of a kernel launch (~4 us of host
 * time on the H200 machine). For call {@code n} (its stream number: these calls are numbered apart from
 * the communicator's tickets) the host writes the arguments into ring slot {@code n % RING_SLOTS} of
 * mapped host memory and publishes {@code n}, then queues on the caller's stream a write of {@code n}
 * into the doorbell and a wait until the done word reaches {@code n} (StreamMemOps). The stream thus
 * orders the call as it would a launched kernel: the doorbell rings once the work before it is done,
 * and the work after it starts once the kernel wrote its result.
 *
 * <pre>
 *  ring (pinned, mapped): RING_SLOTS slots of 64 bytes, a call's four LL lines (ResidentKernel.putCall)
 *  control (pinned, mapped):
 *     0  PUBLISHED  u64, host: the last stream number queued
 *     8  STOP       u64, host: nonzero once the communicator closes
 *    64  EXIT       u64, kernel: state | last number done << 32 (0 running, 1 deciding to end, 2 ended)
 *   128  CONSUMED   u64, kernel: the last number whose slot it has read
 *  words (device memory): the doorbell (u32) at 0, the done word (u32) at 128
 * </pre>
 * The kernel ends after {@link ResidentKernel#IDLE_NS} without a call (so that a {@code cuMemFree} in the
 * process is held at most that long) but only once every published call has run; before it ends it says
 * so (EXIT deciding) and watches PUBLISHED for 20 us, while the host publishes before it reads EXIT: one
 * of the two always sees the other. An ended kernel is launched again by the next call. After an abort
 * the kernel moves the done word far ahead, so that no stream waits forever; the failure surfaces at the
 * host's next call, synchronize or checkErrors. Not thread safe; owned by its communicator.
 */
final class StreamResidentKernel implements AutoCloseable {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    static final String KERNEL = "sccl_stream_resident";
    /** resident.cuh's STREAM_RING_SLOTS, control offsets and exit states (DevCommLayoutTest compares them). */
    static final int RING_SLOTS = 1024;
    static final int CTL_PUBLISHED = 0;
    static final int CTL_STOP = 8;
    static final int CTL_EXIT = 64;
    static final int CTL_CONSUMED = 128;
    static final int EXIT_DECIDING = 1;
    static final int EXIT_ENDED = 2;
    /** Offsets in resident.cuh's StreamResidentArgs, the kernel's one parameter (DevCommLayoutTest too). */
    static final int PARAM_COMM = 0;
    static final int PARAM_RING = 8;
    static final int PARAM_CONTROL = 16;
    static final int PARAM_BELL = 24;
    static final int PARAM_DONE = 32;
    static final int PARAM_LAST_SEQ = 40;
    static final int PARAM_IDLE_NS = 48;
    static final int PARAM_BYTES = 64;
    private static final int SLOT_BYTES = 64;
    private static final int CONTROL_BYTES = 256;
    private static final int BELL = 0;
    private static final int DONE = 128;

    private final CudaDevice device;
    private final CudaStream stream;
    private final PinnedHostBuffer ringMemory;
    private final PinnedHostBuffer controlMemory;
    private final DeviceBuffer words;
    private final UnsafeBuffer ring;
    private final UnsafeBuffer control;
    private final StreamMemOps memOps;
    private final CUfunction function;
    private final ByteBuffer params = ByteBuffer.allocateDirect(PARAM_BYTES).order(ByteOrder.LITTLE_ENDIAN);
    private final Pointer kernelParams = Pointer.to(Pointer.to(params));
    private final int threads;
    private final String where;
    /** The stream number of the last call queued. */
    private int queued;
    private boolean launched;
    private int launches;

    StreamResidentKernel(CudaDevice device, KernelModule module, long devComm, int threads, String where) {
        this.device = device;
        this.threads = threads;
        this.where = where;
        this.function = module.function(KERNEL);
        CudaStream s = null;
        PinnedHostBuffer r = null;
        PinnedHostBuffer c = null;
        DeviceBuffer w = null;
        try {
            s = new CudaStream(device, where);
            r = PinnedHostBuffer.allocate(device, (long) RING_SLOTS * SLOT_BYTES, where + " stream-resident ring");
            c = PinnedHostBuffer.allocate(device, CONTROL_BYTES, where + " stream-resident control");
            w = DeviceBuffer.allocate(device, 256, where + " stream-resident doorbell");
            w.fill((byte) 0, s);
            s.synchronize();
            this.memOps = new StreamMemOps(w.address() + BELL, w.address() + DONE, where);
        } catch (RuntimeException e) {
            try {
                closeAll(w, c, r, s);
            } catch (RuntimeException x) {
                e.addSuppressed(x);
            }
            throw e;
        }
        this.stream = s;
        this.ringMemory = r;
        this.controlMemory = c;
        this.words = w;
        this.ring = new UnsafeBuffer(r.address(), RING_SLOTS * SLOT_BYTES);
        this.control = new UnsafeBuffer(c.address(), CONTROL_BYTES);
        ring.setMemory(0, RING_SLOTS * SLOT_BYTES, (byte) 0);
        control.setMemory(0, CONTROL_BYTES, (byte) 0);
        params.putLong(PARAM_COMM, devComm);
        params.putLong(PARAM_RING, r.devicePointer());
        params.putLong(PARAM_CONTROL, c.devicePointer());
        params.putLong(PARAM_BELL, w.address() + BELL);
        params.putLong(PARAM_DONE, w.address() + DONE);
        params.putLong(PARAM_IDLE_NS, ResidentKernel.IDLE_NS);
    }

    /**
     * Queues the call in {@code args} (CollArgs) on {@code on}: its slot, PUBLISHED, the kernel running
     * (launched again if it ended), then the doorbell write and the wait on {@code on}. {@code failed}
     * says whether the communicator has failed meanwhile (a kernel that aborted never frees a slot).
     */
    void enqueue(ByteBuffer args, CudaStream on, BooleanSupplier failed) {
        int n = queued + 1;
        awaitFreeSlot(n, failed);
        ResidentKernel.putCall(ring, (n & (RING_SLOTS - 1)) * SLOT_BYTES, args, n);
        // PUBLISHED before EXIT is read (a volatile store then a volatile load: ordered, as the kernel's
        // EXIT-deciding store then its PUBLISHED loads are): a kernel about to end sees this call, or the
        // host sees it ending.
        control.putLongVolatile(CTL_PUBLISHED, Integer.toUnsignedLong(n));
        ensureRunning();
        memOps.writeThenWait(on, n, n);
        queued = n;
    }

    /** Waits until the slot of call {@code n} is free: the kernel has read call {@code n - RING_SLOTS}. */
    private void awaitFreeSlot(int n, BooleanSupplier failed) {
        while (n - (int) control.getLongVolatile(CTL_CONSUMED) > RING_SLOTS - 1) {
            if (failed.getAsBoolean()) {
                throw new CclException(where + ": the stream-resident kernel stopped with " + RING_SLOTS
                        + " stream-ordered calls queued; the communicator has failed (see the next checkErrors)");
            }
            if (state(control.getLongVolatile(CTL_EXIT)) == EXIT_ENDED) {
                ensureRunning(); // it ended with calls still to take (cannot happen unless aborted): start it
            }
            Thread.onSpinWait();
        }
    }

    /** Launches the kernel unless it runs; waits out a kernel that is deciding whether to end. */
    private void ensureRunning() {
        long exit = control.getLongVolatile(CTL_EXIT);
        while (state(exit) == EXIT_DECIDING) {
            Thread.onSpinWait(); // for at most its 20 us grace: then it runs on (it saw PUBLISHED) or ended
            exit = control.getLongVolatile(CTL_EXIT);
        }
        if (launched && state(exit) != EXIT_ENDED) {
            return;
        }
        // Launched on the kernel's own stream: after the instance that ended, never beside it.
        control.putLongVolatile(CTL_EXIT, 0);
        params.putLong(PARAM_LAST_SEQ, launched ? exit >>> 32 : 0);
        Cuda.check(JCudaDriver.cuLaunchKernel(function, 1, 1, 1, threads, 1, 1, 0, stream.handle(), kernelParams, null),
                "cuLaunchKernel(" + KERNEL + ")", where);
        launched = true;
        launches++;
    }

    private static int state(long exit) {
        return (int) (exit & 0xffffffffL);
    }

    int launches() {
        return launches;
    }

    /**
     * Asks the kernel to end and waits for it, then frees everything. The communicator has waited for its
     * stream-ordered calls first, so the kernel is idle (or ended after an abort).
     */
    @Override
    public void close() {
        try {
            if (launched) {
                control.putLongVolatile(CTL_STOP, 1);
                stream.synchronize();
            }
        } finally {
            launched = false;
            closeAll(words, controlMemory, ringMemory, stream);
        }
    }

    /** Closes each (nulls skipped), even if one before it failed; throws the first failure. */
    private static void closeAll(AutoCloseable... resources) {
        RuntimeException first = null;
        for (AutoCloseable r : resources) {
            if (r == null) {
                continue;
            }
            try {
                r.close();
            } catch (RuntimeException e) {
                first = first == null ? e : first;
            } catch (Exception e) {
                first = first == null ? new IllegalStateException(e) : first;
            }
        }
        if (first != null) {
            throw first;
        }
    }

    @Override
    public String toString() {
        return "stream-resident one-shot kernel on " + device.where();
    }
}
