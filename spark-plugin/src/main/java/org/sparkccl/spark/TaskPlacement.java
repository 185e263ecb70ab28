package org.sparkccl.spark;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.util.Objects;

/**
 * Where one rank of a barrier stage runs: its executor, host, process and GPU. Every rank sends
 * its own with the bootstrap round (see {@link PlacementBootstrap}), so each knows everyone's.
 */
public final class TaskPlacement implements Serializable {
    private static final long serialVersionUID = 1L;

    private final int rank;
    private final String executorId;
    private final String hostId;
    private final long pid;
    private final String gpu;
    private final GpuBinding.Source gpuSource;
    private final String engine;

    /** {@code engine}: HOST or GPU, the engine this rank builds. */
    public TaskPlacement(int rank, String executorId, String hostId, long pid, GpuBinding binding, String engine) {
        this(rank, executorId, hostId, pid, binding.address(), binding.source(), engine);
    }

    private TaskPlacement(int rank, String executorId, String hostId, long pid, String gpu, GpuBinding.Source gpuSource,
                          String engine) {
        this.rank = rank;
        this.executorId = Objects.requireNonNull(executorId);
        this.hostId = Objects.requireNonNull(hostId);
        this.pid = pid;
        this.gpu = gpu;
        this.gpuSource = gpuSource;
        this.engine = Objects.requireNonNull(engine);
    }

    public int rank() {
        return rank;
    }

    public String executorId() {
        return executorId;
    }

    /** Host name and kernel boot id (see HostIdentity). */
    public String hostId() {
        return hostId;
    }

    public long pid() {
        return pid;
    }

    /** GPU address, or null where the rank has none. */
    public String gpu() {
        return gpu;
    }

    public GpuBinding.Source gpuSource() {
        return gpuSource;
    }

    /** The engine this rank builds: HOST (shared memory) or GPU. */
    public String engine() {
        return engine;
    }

    /**
     * What two ranks must not share: one GPU address of one process. (An address names different
     * devices under different CUDA_VISIBLE_DEVICES, so across processes only a device UUID could
     * tell that two ranks share a physical GPU; the GPU engine compares UUIDs itself.)
     */
    String gpuKey() {
        return gpu == null ? null : hostId + "/pid" + pid + "/gpu" + gpu;
    }

    byte[] encode() {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (DataOutputStream out = new DataOutputStream(bytes)) {
            out.writeInt(rank);
            out.writeUTF(executorId);
            out.writeUTF(hostId);
            out.writeLong(pid);
            out.writeBoolean(gpu != null);
            if (gpu != null) {
                out.writeUTF(gpu);
            }
            out.writeUTF(gpuSource.name());
            out.writeUTF(engine);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return bytes.toByteArray();
    }

    static TaskPlacement decode(byte[] data) {
        try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(data))) {
            int rank = in.readInt();
            String executorId = in.readUTF();
            String hostId = in.readUTF();
            long pid = in.readLong();
            String gpu = in.readBoolean() ? in.readUTF() : null;
            GpuBinding.Source source = GpuBinding.Source.valueOf(in.readUTF());
            String engine = in.readUTF();
            if (in.available() != 0) {
                throw new IllegalArgumentException("trailing bytes");
            }
            return new TaskPlacement(rank, executorId, hostId, pid, gpu, source, engine);
        } catch (IOException | IllegalArgumentException e) {
            throw new IllegalArgumentException("damaged task placement", e);
        }
    }

    @Override
    public String toString() {
        return "rank " + rank + " on executor " + executorId + " (pid " + pid + ")"
                + (gpu == null ? ", no GPU" : ", GPU " + gpu) + ", " + engine + " engine";
    }
}
