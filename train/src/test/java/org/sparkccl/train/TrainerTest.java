package org.sparkccl.train;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.sparkccl.core.Bootstrap;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.bootstrap.TcpBootstrap;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.engine.Engines;

/** The training math and the data-parallel loop, without Spark: ranks are threads over a TCP bootstrap. */
class TrainerTest {
    private static final Duration TIMEOUT = Duration.ofSeconds(60);
    private static final List<Example> DIGITS = TrainingData.digitsExamples();
    private static final DataStats STATS = DataStats.of(DIGITS);

    private static TrainConfig config(ModelSpec.Kind kind, OptimizerSpec.Kind optimizer, long steps, String dir,
                                      long every, boolean resume) {
        ModelSpec model = new ModelSpec(kind, STATS.cols(), 16, STATS.classes());
        double lr = optimizer == OptimizerSpec.Kind.ADAM ? 0.01 : 0.1;
        return new TrainConfig(model, new OptimizerSpec(optimizer, lr, 0.9), 64, steps, 3, 10, dir, every, resume, Map.of());
    }

    @Test
    void theDataIsTheBundledDigits() {
        assertEquals(1797, STATS.rows());
        assertEquals(64, STATS.cols());
        assertEquals(10, STATS.classes());
    }

    @Test
    void gradientsMatchFiniteDifferences() {
        FeatureBatch batch = TrainingData.batch(DIGITS.subList(0, 40).iterator(), STATS);
        int[] rows = new int[batch.rows()];
        for (int i = 0; i < rows.length; i++) {
            rows[i] = i;
        }
        for (Model model : List.of(new SoftmaxRegression(64, 10), new Mlp(64, 8, 10), new Mlp(64, new int[] {8, 5}, 10))) {
            int n = (int) model.layout().elementCount();
            float[] w = new float[n];
            model.initialize(w, 11);
            Random random = new Random(5);
            for (int i = 0; i < n; i++) {
                w[i] += (float) (random.nextGaussian() * 0.1); // biases too, away from zero
            }
            double[] gradient = new double[n];
            model.addGradient(w, batch, rows, rows.length, gradient);
            for (int k = 0; k < 60; k++) {
                int i = random.nextInt(n);
                float saved = w[i];
                float h = 1e-2f;
                w[i] = saved + h;
                double up = model.evaluate(w, batch, rows, rows.length, new long[1]);
                w[i] = saved - h;
                double down = model.evaluate(w, batch, rows, rows.length, new long[1]);
                w[i] = saved;
                double numeric = (up - down) / ((double) (saved + h) - (double) (saved - h));
                assertEquals(numeric, gradient[i], 2e-3 + 2e-2 * Math.abs(numeric),
                        model + " parameter " + i);
            }
        }
    }

    @Test
    void distributedTrainingMatchesSingleProcessAndLowersTheLoss() throws Exception {
        for (ModelSpec.Kind kind : ModelSpec.Kind.values()) {
            OptimizerSpec.Kind optimizer = kind == ModelSpec.Kind.MLP ? OptimizerSpec.Kind.ADAM : OptimizerSpec.Kind.SGD;
            TrainConfig config = config(kind, optimizer, 120, null, 1, false);
            TrainResult single = singleProcess(config);
            List<TrainResult> ranks = distributed(3, config);
            double[] losses = single.losses();
            assertTrue(mean(losses, 100, 120) < 0.5 * mean(losses, 0, 10),
                    kind + ": the loss must fall, from " + mean(losses, 0, 10) + " to " + mean(losses, 100, 120));
            assertTrue(single.accuracy() > 0.9, kind + " accuracy " + single.accuracy());
            for (TrainResult r : ranks) {
                double diff = maxRelativeDifference(r.losses(), losses);
                assertTrue(diff < 1e-4, kind + " rank " + r.rank() + ": loss curve differs by " + diff);
                assertArrayEquals(ranks.get(0).weights(), r.weights(), "every rank must hold the same weights");
                assertEquals(single.accuracy(), r.accuracy(), 0.01);
            }
        }
    }

    @Test
    void checkpointThenResumeEqualsUninterrupted(@TempDir Path dir) throws Exception {
        for (OptimizerSpec.Kind optimizer : OptimizerSpec.Kind.values()) {
            String straight = dir.resolve(optimizer + "-straight").toUri().toString();
            String halves = dir.resolve(optimizer + "-halves").toUri().toString();
            List<TrainResult> uninterrupted = distributed(2, config(ModelSpec.Kind.MLP, optimizer, 40, straight, 20, false));
            List<TrainResult> firstHalf = distributed(2, config(ModelSpec.Kind.MLP, optimizer, 20, halves, 20, false));
            List<TrainResult> secondHalf = distributed(2, config(ModelSpec.Kind.MLP, optimizer, 40, halves, 20, true));
            assertEquals(0, firstHalf.get(0).firstStep());
            assertEquals(20, secondHalf.get(0).firstStep(), "resumed from the step-20 checkpoint");
            assertArrayEquals(uninterrupted.get(0).weights(), secondHalf.get(0).weights(),
                    optimizer + ": resumed weights must equal the uninterrupted run's");
            double[] all = uninterrupted.get(0).losses();
            double[] resumed = secondHalf.get(0).losses();
            for (int i = 0; i < resumed.length; i++) {
                assertEquals(all[20 + i], resumed[i], 0.0, "loss of step " + (20 + i));
            }
        }
    }

    static double mean(double[] values, int from, int to) {
        double s = 0;
        for (int i = from; i < to; i++) {
            s += values[i];
        }
        return s / (to - from);
    }

    static double maxRelativeDifference(double[] a, double[] b) {
        assertEquals(b.length, a.length);
        double worst = 0;
        for (int i = 0; i < a.length; i++) {
            worst = Math.max(worst, Math.abs(a[i] - b[i]) / Math.max(Math.abs(b[i]), 1e-3));
        }
        return worst;
    }

    private static TrainResult singleProcess(TrainConfig config) {
        FeatureBatch all = TrainingData.batch(DIGITS.iterator(), STATS);
        try (BufferAllocator allocator = new RootAllocator()) {
            return new Trainer(config, new Shard(all, 0, 1, all.rows()), all.rows()).run(StepCollectives.singleProcess(), allocator);
        }
    }

    /** {@code n} ranks as threads of this JVM, each with the examples whose id is its rank modulo n. */
    private static List<TrainResult> distributed(int n, TrainConfig config) throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(n);
        try (TcpBootstrap.Rendezvous rendezvous = TcpBootstrap.listen(TcpBootstrap.loopback(0), n, TIMEOUT, "train")) {
            InetSocketAddress address = rendezvous.localAddress();
            List<Future<TrainResult>> futures = new ArrayList<>();
            for (int r = 0; r < n; r++) {
                int rank = r;
                futures.add(pool.submit(() -> {
                    List<Example> mine = new ArrayList<>();
                    for (Example e : DIGITS) {
                        if (e.id() % n == rank) {
                            mine.add(e);
                        }
                    }
                    FeatureBatch batch = TrainingData.batch(mine.iterator(), STATS);
                    try (Bootstrap bootstrap = rank == 0 ? rendezvous.awaitRanks()
                            : TcpBootstrap.connect(address, rank, n, TIMEOUT, "train");
                         Communicator comm = Engines.host(bootstrap, Params.defaults());
                         BufferAllocator allocator = new RootAllocator()) {
                        return new Trainer(config, new Shard(batch, rank, n, DIGITS.size()), DIGITS.size())
                                .run(StepCollectives.over(comm), allocator);
                    }
                }));
            }
            List<TrainResult> out = new ArrayList<>();
            for (Future<TrainResult> f : futures) {
                out.add(f.get(120, TimeUnit.SECONDS));
            }
            return out;
        } finally {
            pool.shutdownNow();
        }
    }
}
