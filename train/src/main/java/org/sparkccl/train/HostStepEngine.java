package org.sparkccl.train;

import java.util.Arrays;
import org.apache.arrow.memory.BufferAllocator;
import org.sparkccl.arrow.ElementType;
import org.sparkccl.arrow.GradientBuffer;
import org.sparkccl.core.memory.HostMemorySource;
import org.sparkccl.arrow.TensorInfo;
import org.sparkccl.arrow.TensorLayout;

/**
 * Steps on the CPU: the model adds up its gradient in float64, the float32 sums go into an Arrow
 * {@link GradientBuffer} (with the loss and row count riding along) that the communicator reduces
 * in place (host memory; for a GPU communicator, mapped pinned memory it reduces through its
 * device pointer), and the optimizer updates the weights on the heap.
 */
final class HostStepEngine implements StepEngine {
    static final Factory FACTORY = HostStepEngine::new;

    private final Model model;
    private final Optimizer optimizer;
    private final Shard shard;
    private final StepCollectives collectives;
    private final int params;
    private final HostMemorySource gradientMemory;
    private final GradientBuffer gradients;
    private final float[] weights;
    private final float[][] slots;
    private final double[] sum;
    private final float[] reduced;
    private final float[] mean;

    HostStepEngine(TrainConfig config, Shard shard, int batchSize, StepCollectives collectives, BufferAllocator allocator) {
        this.model = config.model.create();
        this.optimizer = config.optimizer.create();
        this.shard = shard;
        this.collectives = collectives;
        TensorLayout layout = model.layout();
        this.params = (int) layout.elementCount();
        this.gradientMemory = collectives.gradientMemory();
        this.gradients = GradientBuffer.allocate(allocator, "gradients", withBatchTotals(layout), ElementType.FLOAT32,
                gradientMemory);
        this.weights = new float[params];
        this.slots = new float[optimizer.slotNames().length][params];
        this.sum = new double[params];
        this.reduced = new float[params + 2];
        this.mean = new float[params];
    }

    /** The model's tensors plus two totals that ride along with the gradient: summed loss and row count. */
    static TensorLayout withBatchTotals(TensorLayout layout) {
        TensorLayout.Builder b = TensorLayout.builder();
        for (TensorInfo t : layout.tensors()) {
            b.add(t.name(), t.shape());
        }
        return b.add("batch_totals", 2).build();
    }

    @Override
    public void load(float[] newWeights, float[][] newSlots) {
        System.arraycopy(newWeights, 0, weights, 0, params);
        for (int s = 0; s < slots.length; s++) {
            System.arraycopy(newSlots[s], 0, slots[s], 0, params);
        }
    }

    @Override
    public double step(int[] localRows, int count, int globalRows, long step) {
        Arrays.fill(sum, 0);
        double loss = model.addGradient(weights, shard.data(), localRows, count, sum);
        for (int i = 0; i < params; i++) {
            reduced[i] = (float) sum[i];
        }
        reduced[params] = (float) loss;
        reduced[params + 1] = count;
        gradients.copyFrom(reduced);
        collectives.allReduceSum(gradients);
        gradients.copyTo(0, reduced, 0, params + 2);
        float rows = reduced[params + 1];
        if (rows != globalRows) {
            throw new IllegalStateException("rank " + collectives.rank() + ", step " + (step - 1) + ": the ranks hold "
                    + rows + " of the batch's " + globalRows + " rows; the shards do not cover the data");
        }
        for (int i = 0; i < params; i++) {
            mean[i] = reduced[i] / rows;
        }
        optimizer.update(weights, mean, slots, step);
        return reduced[params];
    }

    @Override
    public void store(float[] weightsOut, float[][] slotsOut) {
        System.arraycopy(weights, 0, weightsOut, 0, params);
        if (slotsOut != null) {
            for (int s = 0; s < slots.length; s++) {
                System.arraycopy(slots[s], 0, slotsOut[s], 0, params);
            }
        }
    }

    @Override
    public String describe() {
        return "on the CPU (gradients all-reduced from an Arrow buffer in " + gradientMemory.name()
                + " host memory)";
    }

    @Override
    public void close() {
        gradients.close();
    }
}
