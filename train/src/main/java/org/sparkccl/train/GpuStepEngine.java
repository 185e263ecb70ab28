package org.sparkccl.train;

import org.sparkccl.core.Communicator;
import org.sparkccl.train.gpu.GpuModelTrainer;
import org.sparkccl.train.gpu.GpuNetwork;
import org.sparkccl.train.gpu.GpuOptimizer;

/**
 * Steps on the rank's GPU, through the ipc module's {@link GpuModelTrainer}: the shard, weights,
 * gradient and optimizer state live in device memory, the gradient is all-reduced there by the GPU
 * communicator, and weights come to the host only for checkpoints and the result. This class maps
 * TrainJob's model and optimizer onto the trainer's; it makes no CUDA call itself (the ipc module
 * does, and loads CUDA only when a trainer is opened).
 */
final class GpuStepEngine implements StepEngine {
    private final GpuModelTrainer trainer;
    private final int deviceOrdinal;

    private GpuStepEngine(GpuModelTrainer trainer, int deviceOrdinal) {
        this.trainer = trainer;
        this.deviceOrdinal = deviceOrdinal;
    }

    /** Engines on GPU {@code deviceOrdinal}, all-reducing over {@code comm}, which must be a GPU communicator. */
    static Factory on(Communicator comm, int deviceOrdinal) {
        return (config, shard, batchSize, collectives, allocator) -> {
            int rows = shard.data().rows();
            int[] labels = new int[rows];
            for (int r = 0; r < rows; r++) {
                labels[r] = shard.data().classLabel(r);
            }
            GpuModelTrainer trainer = GpuModelTrainer.open(comm, deviceOrdinal, network(config.model),
                    optimizer(config.optimizer), shard.data().features(), labels, batchSize);
            return new GpuStepEngine(trainer, deviceOrdinal);
        };
    }

    /** Whether the GPU kernels train this model: softmax regression, or an MLP with one hidden layer. */
    static boolean supports(ModelSpec spec) {
        return spec.kind() == ModelSpec.Kind.SOFTMAX || spec.hiddenLayers().length == 1;
    }

    /** The GPU network with the same parameter layout as {@code spec}'s model. */
    static GpuNetwork network(ModelSpec spec) {
        if (!supports(spec)) {
            throw new IllegalArgumentException("the GPU kernels train softmax regression and MLPs of one hidden layer, not "
                    + spec + "; train it on the CPU (--compute cpu) or use one hidden layer");
        }
        return spec.kind() == ModelSpec.Kind.MLP ? GpuNetwork.mlp(spec.inputs(), spec.hidden(), spec.classes())
                : GpuNetwork.softmaxRegression(spec.inputs(), spec.classes());
    }

    /** The GPU optimizer that updates as {@code spec.create()} does. */
    static GpuOptimizer optimizer(OptimizerSpec spec) {
        return spec.kind() == OptimizerSpec.Kind.ADAM
                ? GpuOptimizer.adam(spec.learningRate(), OptimizerSpec.ADAM_BETA1, OptimizerSpec.ADAM_BETA2,
                        OptimizerSpec.ADAM_EPSILON)
                : GpuOptimizer.momentumSgd(spec.learningRate(), spec.momentum());
    }

    @Override
    public void load(float[] weights, float[][] slots) {
        trainer.load(weights, slots);
    }

    @Override
    public double step(int[] localRows, int count, int globalRows, long step) {
        return trainer.step(localRows, count, globalRows, step);
    }

    @Override
    public void store(float[] weights, float[][] slots) {
        trainer.store(weights, slots);
    }

    @Override
    public String describe() {
        return "on GPU " + deviceOrdinal + " (gradients, all-reduce and update in device memory)";
    }

    @Override
    public void close() {
        trainer.close();
    }
}
