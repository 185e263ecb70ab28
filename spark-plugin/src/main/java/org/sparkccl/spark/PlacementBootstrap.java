package org.sparkccl.spark;

import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.sparkccl.core.Bootstrap;
import org.sparkccl.core.CclException;
import org.sparkccl.core.wire.WireFormat;

/**
 * A bootstrap that sends this rank's {@link TaskPlacement} along with whatever the engine sends, in
 * the same round, and checks the placements of all ranks before handing the engine its bytes: no
 * extra {@code allGather} (each costs a second in Spark) and every rank reaches the same verdict
 * from the same bytes, so a bad placement fails every rank alike instead of leaving some waiting.
 */
public final class PlacementBootstrap implements Bootstrap {
    /** The body: the placement and the engine's bytes, each length-prefixed. Version 2: sealed. */
    static final WireFormat FORMAT = WireFormat.sealed("placement message", 0x53435350, 2); // "SCSP"

    private final Bootstrap inner;
    private final TaskPlacement mine;
    private final boolean allowSharedGpu;
    private volatile List<TaskPlacement> placements;

    public PlacementBootstrap(Bootstrap inner, TaskPlacement mine, boolean allowSharedGpu) {
        this.inner = inner;
        this.mine = mine;
        this.allowSharedGpu = allowSharedGpu;
    }

    @Override
    public int rank() {
        return inner.rank();
    }

    @Override
    public int size() {
        return inner.size();
    }

    @Override
    public byte[][] allGather(byte[] payload) {
        byte[] placement = mine.encode();
        ByteBuffer body = ByteBuffer.allocate(8 + placement.length + payload.length);
        body.putInt(placement.length).put(placement).putInt(payload.length).put(payload);
        byte[][] all = inner.allGather(FORMAT.seal(body.array()));
        List<TaskPlacement> gathered = new ArrayList<>(all.length);
        byte[][] payloads = new byte[all.length][];
        for (int r = 0; r < all.length; r++) {
            String from = "rank " + r + " (read by rank " + rank() + ")";
            ByteBuffer in = FORMAT.open(all[r], from);
            try {
                byte[] p = new byte[in.getInt()];
                in.get(p);
                payloads[r] = new byte[in.getInt()];
                in.get(payloads[r]);
                TaskPlacement placementOfR = TaskPlacement.decode(p);
                if (placementOfR.rank() != r) {
                    throw FORMAT.refused(from, "it says it is from rank " + placementOfR.rank(),
                            "it belongs to another communicator or job");
                }
                gathered.add(placementOfR);
            } catch (BufferUnderflowException | NegativeArraySizeException | IllegalArgumentException e) {
                throw FORMAT.malformed(from, "its body does not parse (" + e + ")", e);
            }
        }
        check(gathered, allowSharedGpu);
        placements = List.copyOf(gathered);
        return payloads;
    }

    /** Every rank's placement, by rank; null before the bootstrap round. */
    public List<TaskPlacement> placements() {
        return placements;
    }

    @Override
    public void barrier() {
        inner.barrier();
    }

    @Override
    public void close() {
        inner.close();
    }

    /**
     * One GPU per rank unless sharing is allowed, and either every rank has a GPU or none has: a
     * mixed stage means some executors were given GPUs and others not.
     */
    static void check(List<TaskPlacement> all, boolean allowSharedGpu) {
        Map<String, List<Integer>> byGpu = new LinkedHashMap<>();
        List<Integer> withGpu = new ArrayList<>();
        List<Integer> without = new ArrayList<>();
        for (TaskPlacement p : all) {
            if (p.gpu() == null) {
                without.add(p.rank());
            } else {
                withGpu.add(p.rank());
                byGpu.computeIfAbsent(p.gpuKey(), k -> new ArrayList<>()).add(p.rank());
            }
        }
        if (!withGpu.isEmpty() && !without.isEmpty()) {
            throw new CclException("ranks " + withGpu + " have a GPU and ranks " + without + " have none: give every"
                    + " barrier task a GPU (spark.executor.resource.gpu.amount on every executor and "
                    + SparkConfCheck.TASK_GPU_AMOUNT + "=1) or none");
        }
        List<Integer> gpuEngine = new ArrayList<>();
        List<Integer> hostEngine = new ArrayList<>();
        for (TaskPlacement p : all) {
            (p.engine().equals("GPU") ? gpuEngine : hostEngine).add(p.rank());
        }
        if (!gpuEngine.isEmpty() && !hostEngine.isEmpty()) {
            TaskPlacement hostRank = all.get(hostEngine.get(0));
            throw new CclException("ranks " + gpuEngine + " can use CUDA and ranks " + hostEngine + " cannot (rank "
                    + hostRank.rank() + " runs on executor " + hostRank.executorId() + "): every executor of the stage"
                    + " needs a working NVIDIA driver, or none may be given GPUs; each executor's log says why CUDA"
                    + " is unusable there");
        }
        if (allowSharedGpu) {
            return;
        }
        for (List<Integer> ranks : byGpu.values()) {
            if (ranks.size() > 1) {
                TaskPlacement first = all.get(ranks.get(0));
                throw new CclException("ranks " + ranks + " are all on GPU " + first.gpu() + " of executor "
                        + first.executorId() + ", and sparkccl runs one rank per GPU: give each task its own GPU ("
                        + SparkConfCheck.TASK_GPU_AMOUNT + "=1, with spark.executor.resource.gpu.amount equal to the"
                        + " tasks per executor), or set " + SparkCclSettings.ALLOW_SHARED_GPU.sparkConfKey()
                        + "=true to let ranks share a GPU");
            }
        }
    }

    @Override
    public String toString() {
        return "placement bootstrap over " + inner + (placements == null ? "" : " " + Arrays.toString(placements.toArray()));
    }
}
