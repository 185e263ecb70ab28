package org.sparkccl.spark;

import java.util.Base64;
import org.apache.spark.BarrierTaskContext;
import org.sparkccl.core.Bootstrap;
import org.sparkccl.core.CclException;

/**
 * The bootstrap of a Spark barrier stage: the rank is the partition id, the size the number of
 * partitions, and the one exchange goes through {@link BarrierTaskContext#allGather}, which carries
 * strings, so bytes travel as Base64. Each call costs about a second in Spark 4.2 whatever its size,
 * which is why communicators make exactly one.
 */
public final class BarrierBootstrap implements Bootstrap {
    private final BarrierTaskContext context;

    public BarrierBootstrap(BarrierTaskContext context) {
        this.context = context;
    }

    @Override
    public int rank() {
        return context.partitionId();
    }

    @Override
    public int size() {
        return context.numPartitions();
    }

    @Override
    public byte[][] allGather(byte[] mine) {
        String[] all = context.allGather(Base64.getEncoder().encodeToString(mine));
        if (all.length != size()) {
            throw new CclException("rank " + rank() + ": BarrierTaskContext.allGather returned " + all.length
                    + " messages for a stage of " + size() + " tasks");
        }
        byte[][] out = new byte[all.length][];
        for (int r = 0; r < all.length; r++) {
            try {
                out[r] = Base64.getDecoder().decode(all[r]);
            } catch (IllegalArgumentException e) {
                throw new CclException("rank " + rank() + ": the bootstrap message of rank " + r
                        + " is not Base64; did another library call allGather in this stage at the same time?", e);
            }
        }
        return out;
    }

    @Override
    public void barrier() {
        context.barrier();
    }
}
