package org.sparkccl.spark;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.sparkccl.core.Bootstrap;
import org.sparkccl.core.CclException;

/**
 * A bootstrap that sends this rank's {@link TaskPlacement} along with whatever the engine sends, in
 * the same round, and checks the placements of all ranks before handing the engine its bytes: no
 * extra {@code allGather} (each costs a second in Spark) and every rank reaches the same verdict
 * from the same bytes, so a bad placement fails every rank alike instead of leaving some waiting.
 */
public final class PlacementBootstrap implements Bootstrap {
    private static final int MAGIC = 0x53435350; // "SCSP"
    private static final int VERSION = 1;

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
        ByteBuffer envelope = ByteBuffer.allocate(16 + placement.length + payload.length);
        envelope.putInt(MAGIC).putInt(VERSION).putInt(placement.length).put(placement)
                .putInt(payload.length).put(payload);
        byte[][] all = inner.allGather(envelope.array());
        List<TaskPlacement> gathered = new ArrayList<>(all.length);
        byte[][] payloads = new byte[all.length][];
        for (int r = 0; r < all.length; r++) {
            ByteBuffer in = ByteBuffer.wrap(all[r]);
            try {
                if (in.getInt() != MAGIC || in.getInt() != VERSION) {
                    throw new CclException("rank " + rank() + ": rank " + r + " sent a bootstrap message that is not a"
                            + " sparkccl placement of version " + VERSION + "; use the same sparkccl jar on every executor");
                }
                byte[] p = new byte[in.getInt()];
                in.get(p);
                payloads[r] = new byte[in.getInt()];
                in.get(payloads[r]);
                TaskPlacement placementOfR = TaskPlacement.decode(p);
                if (placementOfR.rank() != r) {
                    throw new CclException("rank " + rank() + ": message " + r + " says it is from rank " + placementOfR.rank());
                }
                gathered.add(placementOfR);
            } catch (RuntimeException e) {
                if (e instanceof CclException) {
                    throw e;
                }
                throw new CclException("rank " + rank() + ": damaged bootstrap message from rank " + r, e);
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
