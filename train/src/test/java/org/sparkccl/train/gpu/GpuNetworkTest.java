package org.sparkccl.train.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

/** The parameter layouts and the refusals; no GPU needed. */
class GpuNetworkTest {
    @Test
    void mlpLayoutIsW1B1W2B2() {
        GpuNetwork net = GpuNetwork.mlp(64, 32, 10);
        assertEquals(0, net.hiddenWeightsAt());
        assertEquals(64 * 32, net.hiddenBiasAt());
        assertEquals(64 * 32 + 32, net.outputWeightsAt());
        assertEquals(64 * 32 + 32 + 32 * 10, net.outputBiasAt());
        assertEquals(64 * 32 + 32 + 32 * 10 + 10, net.parameterCount());
        assertEquals(32, net.outputInputs());
    }

    @Test
    void softmaxLayoutIsWB() {
        GpuNetwork net = GpuNetwork.softmaxRegression(13, 4);
        assertEquals(0, net.outputWeightsAt());
        assertEquals(13 * 4, net.outputBiasAt());
        assertEquals(13 * 4 + 4, net.parameterCount());
        assertEquals(13, net.outputInputs());
    }

    @Test
    void badShapesAndRatesAreRefused() {
        assertThrows(IllegalArgumentException.class, () -> GpuNetwork.mlp(4, 0, 3));
        assertThrows(IllegalArgumentException.class, () -> GpuNetwork.softmaxRegression(4, 1));
        assertThrows(IllegalArgumentException.class, () -> new GpuNetwork(0, 2, 3));
        assertThrows(IllegalArgumentException.class, () -> GpuOptimizer.adam(0, 0.9, 0.999, 1e-8));
        assertEquals(1, GpuOptimizer.momentumSgd(0.1, 0.9).slotCount());
        assertEquals(2, GpuOptimizer.adam(0.1, 0.9, 0.999, 1e-8).slotCount());
    }
}
