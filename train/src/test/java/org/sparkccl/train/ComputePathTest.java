package org.sparkccl.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.junit.jupiter.api.Test;
import org.sparkccl.arrow.TensorLayout;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.MemoryKind;
import org.sparkccl.core.bootstrap.ThreadGroupBootstrap;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.engine.Engines;
import org.sparkccl.train.gpu.GpuNetwork;
import org.sparkccl.train.gpu.GpuOptimizer;

/** Which path a rank trains on, and what the GPU path is handed; no GPU needed. */
class ComputePathTest {
    @Test
    void aGpuCommunicatorMeansGpuStepsUnlessTheUserAsksForTheCpu() {
        assertEquals(ComputePath.GPU, ComputePath.choose(ComputePath.Choice.AUTO, MemoryKind.DEVICE, 0));
        assertEquals(ComputePath.CPU, ComputePath.choose(ComputePath.Choice.AUTO, MemoryKind.HOST, 0));
        assertEquals(ComputePath.CPU, ComputePath.choose(ComputePath.Choice.CPU, MemoryKind.DEVICE, 0));
        assertEquals(ComputePath.CPU, ComputePath.choose(ComputePath.Choice.CPU, MemoryKind.HOST, 0));
        assertEquals(ComputePath.GPU, ComputePath.choose(ComputePath.Choice.GPU, MemoryKind.DEVICE, 0));
        IllegalStateException e = assertThrows(IllegalStateException.class,
                () -> ComputePath.choose(ComputePath.Choice.GPU, MemoryKind.HOST, 3));
        assertTrue(e.getMessage().startsWith("rank 3: --compute gpu"), e.getMessage());
        assertEquals(ComputePath.Choice.AUTO, ComputePath.Choice.parse(" Auto "));
        assertThrows(IllegalArgumentException.class, () -> ComputePath.Choice.parse("tpu"));
    }

    @Test
    void theConfigKeepsTheChoice() {
        TrainConfig config = new TrainConfig(new ModelSpec(ModelSpec.Kind.MLP, 4, 3, 2),
                new OptimizerSpec(OptimizerSpec.Kind.ADAM, 0.01, 0.9), 8, 10, 1, 5, null, 1, false, Map.of());
        assertEquals(ComputePath.Choice.AUTO, config.compute());
        TrainConfig cpu = config.withCompute(ComputePath.Choice.CPU);
        assertEquals(ComputePath.Choice.CPU, cpu.compute());
        assertEquals(ComputePath.Choice.CPU, cpu.withSteps(20, null, 1, false).compute());
    }

    @Test
    void theGpuNetworkHasTheCpuModelsParameterLayout() {
        ModelSpec mlp = new ModelSpec(ModelSpec.Kind.MLP, 64, 32, 10);
        GpuNetwork net = GpuStepEngine.network(mlp);
        TensorLayout layout = mlp.create().layout();
        assertEquals(layout.elementCount(), net.parameterCount());
        assertEquals(layout.tensor("W1").offset(), net.hiddenWeightsAt());
        assertEquals(layout.tensor("b1").offset(), net.hiddenBiasAt());
        assertEquals(layout.tensor("W2").offset(), net.outputWeightsAt());
        assertEquals(layout.tensor("b2").offset(), net.outputBiasAt());
        assertEquals(List.of(64L, 32L), List.of(layout.tensor("W1").dim(0), layout.tensor("W1").dim(1)));

        ModelSpec softmax = new ModelSpec(ModelSpec.Kind.SOFTMAX, 13, 0, 4);
        GpuNetwork linear = GpuStepEngine.network(softmax);
        TensorLayout linearLayout = softmax.create().layout();
        assertEquals(linearLayout.elementCount(), linear.parameterCount());
        assertEquals(linearLayout.tensor("W").offset(), linear.outputWeightsAt());
        assertEquals(linearLayout.tensor("b").offset(), linear.outputBiasAt());
        assertEquals(0, linear.hidden());
    }

    @Test
    void theGpuOptimizerIsTheCpuOnesHyperparameters() {
        GpuOptimizer adam = GpuStepEngine.optimizer(new OptimizerSpec(OptimizerSpec.Kind.ADAM, 0.003, 0.5));
        assertEquals(GpuOptimizer.adam(0.003, 0.9, 0.999, 1e-8), adam);
        GpuOptimizer sgd = GpuStepEngine.optimizer(new OptimizerSpec(OptimizerSpec.Kind.SGD, 0.2, 0.8));
        assertEquals(GpuOptimizer.momentumSgd(0.2, 0.8), sgd);
        assertEquals(OptimizerSpec.Kind.ADAM, new OptimizerSpec(OptimizerSpec.Kind.ADAM, 0.003, 0.5).kind());
        assertEquals(2, adam.slotCount());
        assertEquals(new Adam(0.003, 0.9, 0.999, 1e-8).slotNames().length, adam.slotCount());
        assertEquals(new MomentumSgd(0.2, 0.8).slotNames().length, sgd.slotCount());
    }

    @Test
    void theGpuEngineRefusesAHostCommunicator() throws Exception {
        ModelSpec spec = new ModelSpec(ModelSpec.Kind.MLP, 3, 2, 2);
        TrainConfig config = new TrainConfig(spec, new OptimizerSpec(OptimizerSpec.Kind.SGD, 0.1, 0.9), 2, 1, 1, 1,
                null, 1, false, Map.of());
        FeatureBatch data = FeatureBatch.of(2, 3, new float[] {0.5f, -1, 2, 1, 0.25f, -0.5f}, new float[] {0, 1});
        ThreadGroupBootstrap bootstrap = new ThreadGroupBootstrap.Group(1).member(0);
        try (Communicator comm = Engines.host(bootstrap, Params.defaults());
             BufferAllocator allocator = new RootAllocator()) {
            RuntimeException e = assertThrows(RuntimeException.class, () -> StepEngines.gpu(comm, 0)
                    .open(config, new Shard(data, 0, 1, 2), 2, StepCollectives.over(comm), allocator));
            // Without a GPU the ipc module says why GPUs cannot be used; with one, that the communicator is not a GPU one.
            assertTrue(e.getMessage().contains("GPUs cannot be used here") || e.getMessage().contains("needs a GPU"
                    + " communicator"), e.getMessage());
        }
    }
}
