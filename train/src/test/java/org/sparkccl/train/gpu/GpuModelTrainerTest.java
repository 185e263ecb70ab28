package org.sparkccl.train.gpu;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * GPU training against the float64 CPU reference (TrainReference), on random data: gradients of
 * both models, one optimizer update of each kind, and two ranks that all-reduce their gradients in
 * device memory and must end where one process training on the whole batch ends.
 */
@Tag("gpu")
class GpuModelTrainerTest {
    private static final GpuOptimizer SGD = GpuOptimizer.momentumSgd(0.1, 0.9);
    private static final GpuOptimizer ADAM = GpuOptimizer.adam(0.01, 0.9, 0.999, 1e-8);

    @Test
    void mlpGradientsMatchTheReference() throws Exception {
        gradientsMatch(GpuNetwork.mlp(64, 32, 10), 300, 256, 1);
        gradientsMatch(GpuNetwork.mlp(7, 5, 3), 41, 37, 2); // no size a multiple of the 16-wide tiles
    }

    @Test
    void softmaxGradientsMatchTheReference() throws Exception {
        gradientsMatch(GpuNetwork.softmaxRegression(64, 10), 300, 256, 3);
        gradientsMatch(GpuNetwork.softmaxRegression(13, 4), 29, 23, 4);
    }

    private void gradientsMatch(GpuNetwork net, int shardRows, int batch, long seed) throws Exception {
        GpuTrainTestSupport.assumeGpu();
        Random random = new Random(seed);
        float[] x = TrainReference.gaussian(random, shardRows * net.inputs(), 1.0);
        int[] labels = TrainReference.labels(random, shardRows, net.classes());
        float[] w = TrainReference.gaussian(random, net.parameterCount(), 0.3);
        int[] rows = new int[batch];
        for (int i = 0; i < batch; i++) {
            rows[i] = random.nextInt(shardRows); // repeats too: a gathered row may appear twice
        }
        double[] expected = TrainReference.gradient(net, w, x, labels, rows, batch);
        List<float[]> got = GpuTrainTestSupport.runRanks(1, (comm, bootstrap) -> {
            try (GpuModelTrainer trainer = GpuModelTrainer.open(comm, comm.device().ordinal(), net, SGD, x, labels,
                    batch)) {
                trainer.load(w, null);
                float[] g = new float[net.parameterCount() + 2];
                trainer.computeGradient(rows, batch);
                trainer.readGradient(g);
                float[] empty = new float[net.parameterCount() + 2];
                trainer.computeGradient(rows, 0);
                trainer.readGradient(empty);
                assertArrayEquals(new float[net.parameterCount() + 2], empty, "a rank without rows adds nothing");
                return g;
            }
        });
        float[] g = got.get(0);
        int p = net.parameterCount();
        if (net.hasHiddenLayer()) {
            assertClose("W1", expected, g, net.hiddenWeightsAt(), net.hiddenBiasAt());
            assertClose("b1", expected, g, net.hiddenBiasAt(), net.outputWeightsAt());
        }
        assertClose("W out", expected, g, net.outputWeightsAt(), net.outputBiasAt());
        assertClose("b out", expected, g, net.outputBiasAt(), p);
        assertEquals(expected[p], g[p], 1e-5 * expected[p], "summed loss");
        assertEquals(batch, g[p + 1], "row count");
    }

    /**
     * Float32 sums of {@code batch} terms against float64: within 1e-3 of the tensor's largest
     * gradient (a wrong index or a missing term is off by about the gradient itself).
     */
    private static void assertClose(String tensor, double[] expected, float[] got, int from, int to) {
        double scale = 0;
        for (int i = from; i < to; i++) {
            scale = Math.max(scale, Math.abs(expected[i]));
        }
        assertTrue(scale > 0, tensor + ": the reference gradient is all zeros; the test data is too easy");
        double worst = 0;
        int worstAt = from;
        for (int i = from; i < to; i++) {
            double d = Math.abs(expected[i] - got[i]);
            if (d > worst) {
                worst = d;
                worstAt = i;
            }
        }
        System.out.printf(Locale.ROOT, "%s: largest difference %.3g (of gradients up to %.3g)%n", tensor, worst, scale);
        assertTrue(worst <= 1e-3 * scale + 1e-6, String.format(Locale.ROOT, "%s[%d]: GPU %.8g, float64 reference %.8g"
                + " (tensor's largest gradient %.4g)", tensor, worstAt - from, got[worstAt], expected[worstAt], scale));
    }

    @Test
    void momentumSgdStepMatchesTheCpuOptimizer() throws Exception {
        updateMatches(SGD, 5);
    }

    @Test
    void adamStepMatchesTheCpuOptimizer() throws Exception {
        updateMatches(ADAM, 6);
    }

    /** Same float gradient in, same update out: the kernels round as the Java optimizers do. */
    private void updateMatches(GpuOptimizer opt, long seed) throws Exception {
        GpuTrainTestSupport.assumeGpu();
        GpuNetwork net = GpuNetwork.mlp(9, 6, 4);
        int p = net.parameterCount();
        Random random = new Random(seed);
        float rows = 48;
        float[] gradient = TrainReference.gaussian(random, p + 2, 5.0);
        gradient[p] = 30f;
        gradient[p + 1] = rows;
        float[] w = TrainReference.gaussian(random, p, 0.5);
        float[][] slots = new float[opt.slotCount()][];
        for (int s = 0; s < slots.length; s++) {
            slots[s] = TrainReference.gaussian(random, p, 0.1);
        }
        if (opt.kind() == GpuOptimizer.Kind.ADAM) {
            for (int i = 0; i < p; i++) {
                slots[1][i] = Math.abs(slots[1][i]) * 0.01f; // a second moment is never negative
            }
        }
        long step = 3;
        float[] expectedW = w.clone();
        float[][] expectedSlots = new float[slots.length][];
        for (int s = 0; s < slots.length; s++) {
            expectedSlots[s] = slots[s].clone();
        }
        float[] mean = new float[p];
        for (int i = 0; i < p; i++) {
            mean[i] = gradient[i] / rows;
        }
        TrainReference.update(opt, expectedW, mean, expectedSlots, step);

        float[] x = TrainReference.gaussian(random, 5 * net.inputs(), 1.0);
        int[] labels = TrainReference.labels(random, 5, net.classes());
        List<float[][]> got = GpuTrainTestSupport.runRanks(1, (comm, bootstrap) -> {
            try (GpuModelTrainer trainer = GpuModelTrainer.open(comm, comm.device().ordinal(), net, opt, x, labels, 5)) {
                trainer.load(w, slots);
                trainer.writeGradient(gradient);
                trainer.applyUpdate(step, rows);
                float[][] out = new float[1 + slots.length][p];
                float[][] outSlots = new float[slots.length][];
                System.arraycopy(out, 1, outSlots, 0, slots.length);
                trainer.store(out[0], outSlots);
                return out;
            }
        });
        float[][] out = got.get(0);
        assertWithinUlps("weights", expectedW, out[0]);
        for (int s = 0; s < slots.length; s++) {
            assertWithinUlps("slot " + s, expectedSlots[s], out[1 + s]);
        }
    }

    private static void assertWithinUlps(String what, float[] expected, float[] got) {
        for (int i = 0; i < expected.length; i++) {
            float tolerance = 2 * Math.ulp(Math.max(Math.abs(expected[i]), Math.abs(got[i])));
            assertTrue(Math.abs(expected[i] - got[i]) <= tolerance, what + "[" + i + "]: GPU " + got[i] + ", CPU "
                    + expected[i]);
        }
    }

    @Test
    void twoRanksWithMomentumSgdEndLikeOneProcess() throws Exception {
        twoRanksTrain(GpuNetwork.mlp(64, 32, 10), SGD, 7);
        twoRanksTrain(GpuNetwork.softmaxRegression(64, 10), SGD, 8);
    }

    @Test
    void twoRanksWithAdamEndLikeOneProcess() throws Exception {
        twoRanksTrain(GpuNetwork.mlp(64, 32, 10), ADAM, 9);
    }

    /**
     * Two ranks, each holding the examples whose id is congruent to its rank (as TrainJob shards),
     * train 6 steps of 64-example minibatches with the gradient all-reduced on the devices. They
     * must end with bit-identical weights, and with the weights (momentum SGD) or losses (Adam,
     * whose first steps are about lr * sign(g), undetermined for gradients within rounding of 0) of
     * the float64 reference trained in one process on the whole minibatches.
     */
    private void twoRanksTrain(GpuNetwork net, GpuOptimizer opt, long seed) throws Exception {
        GpuTrainTestSupport.assumeGpu();
        int n = 256;
        int batch = 64;
        int steps = 6;
        Random random = new Random(seed);
        float[] x = TrainReference.gaussian(random, n * net.inputs(), 1.0);
        int[] labels = TrainReference.labels(random, n, net.classes());
        float[] initial = TrainReference.gaussian(random, net.parameterCount(), 0.2);
        int[][] batches = new int[steps][batch];
        for (int s = 0; s < steps; s++) {
            for (int i = 0; i < batch; i++) {
                batches[s][i] = random.nextInt(n);
            }
        }

        // The reference: one process, every example.
        int[] all = new int[n];
        for (int i = 0; i < n; i++) {
            all[i] = i;
        }
        float[] expected = initial.clone();
        float[][] slots = new float[opt.slotCount()][net.parameterCount()];
        double[] expectedLoss = new double[steps];
        for (int s = 0; s < steps; s++) {
            double[] g = TrainReference.gradient(net, expected, x, labels, batches[s], batch);
            float[] mean = new float[net.parameterCount()];
            for (int i = 0; i < mean.length; i++) {
                mean[i] = (float) g[i] / batch;
            }
            expectedLoss[s] = g[net.parameterCount()] / batch;
            TrainReference.update(opt, expected, mean, slots, s + 1);
        }

        List<double[]> ranks = GpuTrainTestSupport.runRanks(2, (comm, bootstrap) -> {
            int rank = comm.rank();
            int shardRows = n / 2;
            float[] shardX = new float[shardRows * net.inputs()];
            int[] shardLabels = new int[shardRows];
            for (int local = 0; local < shardRows; local++) {
                int id = local * 2 + rank;
                System.arraycopy(x, id * net.inputs(), shardX, local * net.inputs(), net.inputs());
                shardLabels[local] = labels[id];
            }
            double[] result = new double[net.parameterCount() + steps];
            GpuModelTrainer trainer = GpuModelTrainer.open(comm, comm.device().ordinal(), net, opt, shardX,
                    shardLabels, batch);
            try {
                trainer.load(initial, null);
                int[] local = new int[batch];
                for (int s = 0; s < steps; s++) {
                    int count = 0;
                    for (int id : batches[s]) {
                        if (id % 2 == rank) {
                            local[count++] = id / 2;
                        }
                    }
                    result[net.parameterCount() + s] = trainer.step(local, count, batch, s + 1) / batch;
                }
                float[] w = new float[net.parameterCount()];
                trainer.store(w, null);
                for (int i = 0; i < w.length; i++) {
                    result[i] = w[i];
                }
            } finally {
                bootstrap.barrier(); // both ranks are past their last collective before device memory is freed
                trainer.close();
            }
            return result;
        });
        assertArrayEquals(ranks.get(0), ranks.get(1), "the two ranks' weights and losses differ");
        double[] got = ranks.get(0);
        List<String> far = new ArrayList<>();
        for (int s = 0; s < steps; s++) {
            double rel = Math.abs(got[net.parameterCount() + s] - expectedLoss[s]) / expectedLoss[s];
            if (rel > 1e-4) {
                far.add(String.format(Locale.ROOT, "step %d loss: GPU %.7g, reference %.7g", s + 1,
                        got[net.parameterCount() + s], expectedLoss[s]));
            }
        }
        if (opt.kind() == GpuOptimizer.Kind.MOMENTUM_SGD) {
            double worst = 0;
            for (int i = 0; i < net.parameterCount(); i++) {
                double d = Math.abs(got[i] - expected[i]);
                worst = Math.max(worst, d);
                if (d > 2e-4 * (1 + Math.abs(expected[i])) && far.size() < 20) {
                    far.add(String.format(Locale.ROOT, "weight %d: GPU %.7g, reference %.7g", i, got[i], expected[i]));
                }
            }
            System.out.printf(Locale.ROOT, "%s, 2 ranks, %d steps: largest weight difference to the reference %.3g%n",
                    net, steps, worst);
        }
        assertTrue(far.isEmpty(), net + " with " + opt.kind() + ":\n" + String.join("\n", far));
    }

    /**
     * A checkpoint of the GPU path is {@link GpuModelTrainer#store} of weights and slots; resuming is
     * {@link GpuModelTrainer#load} into a fresh trainer. Three steps, store, a new trainer, three more
     * must end bit for bit where six uninterrupted steps end (the kernels are deterministic).
     */
    @Test
    void storeThenLoadContinuesExactly() throws Exception {
        GpuTrainTestSupport.assumeGpu();
        GpuNetwork net = GpuNetwork.mlp(12, 8, 5);
        int p = net.parameterCount();
        Random random = new Random(10);
        int rows = 90;
        int batch = 32;
        float[] x = TrainReference.gaussian(random, rows * net.inputs(), 1.0);
        int[] labels = TrainReference.labels(random, rows, net.classes());
        float[] initial = TrainReference.gaussian(random, p, 0.3);
        int[][] batches = new int[6][batch];
        for (int[] b : batches) {
            for (int i = 0; i < batch; i++) {
                b[i] = random.nextInt(rows);
            }
        }
        List<float[]> got = GpuTrainTestSupport.runRanks(1, (comm, bootstrap) -> {
            int device = comm.device().ordinal();
            float[] straight = new float[p];
            try (GpuModelTrainer trainer = GpuModelTrainer.open(comm, device, net, ADAM, x, labels, batch)) {
                trainer.load(initial, new float[][] {new float[p], new float[p]});
                for (int s = 0; s < 6; s++) {
                    trainer.step(batches[s], batch, batch, s + 1);
                }
                trainer.store(straight, null);
            }
            float[] w = new float[p];
            float[][] slots = {new float[p], new float[p]};
            try (GpuModelTrainer first = GpuModelTrainer.open(comm, device, net, ADAM, x, labels, batch)) {
                first.load(initial, new float[][] {new float[p], new float[p]});
                for (int s = 0; s < 3; s++) {
                    first.step(batches[s], batch, batch, s + 1);
                }
                first.store(w, slots);
            }
            float[] resumed = new float[p];
            try (GpuModelTrainer second = GpuModelTrainer.open(comm, device, net, ADAM, x, labels, batch)) {
                second.load(w, slots);
                for (int s = 3; s < 6; s++) {
                    second.step(batches[s], batch, batch, s + 1);
                }
                second.store(resumed, null);
            }
            assertTrue(!Arrays.equals(initial, straight), "six steps changed the weights");
            return concat(straight, resumed);
        });
        float[] both = got.get(0);
        assertArrayEquals(Arrays.copyOfRange(both, 0, p), Arrays.copyOfRange(both, p, 2 * p),
                "resumed weights must equal the uninterrupted run's");
    }

    private static float[] concat(float[] a, float[] b) {
        float[] out = Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, out, a.length, b.length);
        return out;
    }
}
