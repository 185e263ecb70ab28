package org.sparkccl.train.gpu;

import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import org.sparkccl.core.bootstrap.ThreadGroupBootstrap;
import org.sparkccl.core.param.Params;
import org.sparkccl.ipc.cuda.DeviceBuffer;
import org.sparkccl.ipc.cuda.GpuSupport;
import org.sparkccl.ipc.gpu.GpuCommunicator;
import org.sparkccl.ipc.gpu.GpuCommunicators;

/**
 * Data-parallel GPU training speed without Spark: ranks are threads of this JVM (rank r on GPU r
 * mod the visible GPUs), each trains a {@link GpuModelTrainer} on its shard of random data whose
 * labels come from a random linear teacher (so the loss falls), and rank 0 prints samples per
 * second and where a step's time goes (gradient kernels, device all-reduce, update).
 *
 * <pre>
 *   GpuTrainBench [--ranks 2] [--model mlp|softmax] [--inputs 64] [--hidden 32] [--classes 10]
 *                 [--rows 65536] [--batch 4096] [--steps 200] [--warmup 20] [--optimizer adam|sgd]
 * </pre>
 */
public final class GpuTrainBench {
    private int ranks = 2;
    private String model = "mlp";
    private int inputs = 64;
    private int hidden = 32;
    private int classes = 10;
    private int rows = 65536;
    private int batch = 4096;
    private int steps = 200;
    private int warmup = 20;
    private String optimizer = "adam";

    public static void main(String[] args) throws Exception {
        GpuTrainBench bench = new GpuTrainBench();
        bench.parse(args);
        System.exit(bench.run());
    }

    private void parse(String[] args) {
        for (int i = 0; i + 1 < args.length; i += 2) {
            String value = args[i + 1];
            switch (args[i]) {
                case "--ranks" -> ranks = Integer.parseInt(value);
                case "--model" -> model = value;
                case "--inputs" -> inputs = Integer.parseInt(value);
                case "--hidden" -> hidden = Integer.parseInt(value);
                case "--classes" -> classes = Integer.parseInt(value);
                case "--rows" -> rows = Integer.parseInt(value);
                case "--batch" -> batch = Integer.parseInt(value);
                case "--steps" -> steps = Integer.parseInt(value);
                case "--warmup" -> warmup = Integer.parseInt(value);
                case "--optimizer" -> optimizer = value;
                default -> throw new IllegalArgumentException("unknown option " + args[i] + " (see the class comment)");
            }
        }
        if (args.length % 2 != 0) {
            throw new IllegalArgumentException("option " + args[args.length - 1] + " needs a value");
        }
    }

    /** Per rank: nanoseconds in gradient kernels, all-reduce and update over the timed steps, then the losses. */
    private record RankTimes(long gradientNs, long allReduceNs, long updateNs, long wallNs, double firstLoss,
                             double lastLoss) {
    }

    private int run() throws Exception {
        String reason = GpuSupport.unavailableReason();
        if (reason != null) {
            System.out.println("no GPU: " + reason);
            return 2;
        }
        GpuNetwork net = model.equals("softmax") ? GpuNetwork.softmaxRegression(inputs, classes)
                : GpuNetwork.mlp(inputs, hidden, classes);
        GpuOptimizer opt = optimizer.equals("sgd") ? GpuOptimizer.momentumSgd(0.1, 0.9)
                : GpuOptimizer.adam(0.01, 0.9, 0.999, 1e-8);
        int gpus = GpuSupport.deviceCount();
        Random random = new Random(1);
        float[] x = new float[rows * inputs];
        for (int i = 0; i < x.length; i++) {
            x[i] = (float) random.nextGaussian();
        }
        float[] teacher = new float[inputs * classes];
        for (int i = 0; i < teacher.length; i++) {
            teacher[i] = (float) random.nextGaussian();
        }
        int[] labels = new int[rows];
        for (int r = 0; r < rows; r++) {
            double best = Double.NEGATIVE_INFINITY;
            for (int c = 0; c < classes; c++) {
                double z = 0;
                for (int i = 0; i < inputs; i++) {
                    z += x[r * inputs + i] * teacher[i * classes + c];
                }
                if (z > best) {
                    best = z;
                    labels[r] = c;
                }
            }
        }
        float[] initial = new float[net.parameterCount()];
        for (int i = 0; i < initial.length; i++) {
            initial[i] = (float) (random.nextGaussian() * 0.1);
        }
        int[][] batches = new int[warmup + steps][batch];
        for (int[] b : batches) {
            for (int i = 0; i < batch; i++) {
                b[i] = random.nextInt(rows);
            }
        }
        System.out.printf(Locale.ROOT, "# %s, %s, %d rank(s) on %d GPU(s) (rank r on GPU r mod %d), %d rows, global batch %d,"
                + " %d timed steps after %d warm-up%n", net, opt.kind(), ranks, Math.min(ranks, gpus), gpus, rows, batch,
                steps, warmup);

        List<RankTimes> times = new ThreadGroupBootstrap.Group(ranks, Duration.ofSeconds(120)).run(
                bootstrap -> trainRank(bootstrap, bootstrap.rank() % gpus, net, opt, x, labels, initial, batches), null);
        RankTimes t = times.get(0);
        long slowestWall = times.stream().mapToLong(RankTimes::wallNs).max().orElse(1);
        System.out.printf(Locale.ROOT, "samples/s %.0f   ms/step %.3f (rank 0: gradient %.3f, all-reduce %.3f, update %.3f)"
                + "   loss %.4f -> %.4f%n", (double) steps * batch * 1e9 / slowestWall, slowestWall / 1e6 / steps,
                t.gradientNs / 1e6 / steps, t.allReduceNs / 1e6 / steps, t.updateNs / 1e6 / steps, t.firstLoss,
                t.lastLoss);
        long leaked = DeviceBuffer.outstandingBytes();
        if (leaked != 0) {
            System.out.println("device memory left allocated: " + leaked + " bytes");
            return 1;
        }
        return 0;
    }

    private RankTimes trainRank(ThreadGroupBootstrap bootstrap, int device, GpuNetwork net, GpuOptimizer opt, float[] x,
                                int[] labels, float[] initial, int[][] batches) throws Exception {
        int rank = bootstrap.rank();
        int shardRows = rows / ranks + (rank < rows % ranks ? 1 : 0);
        float[] shardX = new float[shardRows * inputs];
        int[] shardLabels = new int[shardRows];
        for (int local = 0; local < shardRows; local++) {
            int id = local * ranks + rank;
            System.arraycopy(x, id * inputs, shardX, local * inputs, inputs);
            shardLabels[local] = labels[id];
        }
        try (GpuCommunicator comm = GpuCommunicators.create(bootstrap, device, Params.fromEnvironment())) {
            GpuModelTrainer trainer = GpuModelTrainer.open(comm, device, net, opt, shardX, shardLabels, batch);
            try {
                trainer.load(initial, null);
                int[] local = new int[batch];
                long gradientNs = 0;
                long allReduceNs = 0;
                long updateNs = 0;
                long wallStart = 0;
                double firstLoss = 0;
                double lastLoss = 0;
                for (int s = 0; s < batches.length; s++) {
                    if (s == warmup) {
                        bootstrap.barrier();
                        gradientNs = 0;
                        allReduceNs = 0;
                        updateNs = 0;
                        wallStart = System.nanoTime();
                    }
                    int count = 0;
                    for (int id : batches[s]) {
                        if (id % ranks == rank) {
                            local[count++] = id / ranks;
                        }
                    }
                    long t0 = System.nanoTime();
                    trainer.computeGradient(local, count);
                    long t1 = System.nanoTime();
                    float[] totals = trainer.allReduceGradient();
                    long t2 = System.nanoTime();
                    if (totals[1] != batch) {
                        throw new IllegalStateException("rank " + rank + ", step " + s + ": " + totals[1] + " rows of " + batch);
                    }
                    trainer.applyUpdate(s + 1, totals[1]);
                    long t3 = System.nanoTime();
                    gradientNs += t1 - t0;
                    allReduceNs += t2 - t1;
                    updateNs += t3 - t2;
                    double loss = totals[0] / batch;
                    if (s == 0) {
                        firstLoss = loss;
                    }
                    lastLoss = loss;
                }
                long wall = System.nanoTime() - wallStart;
                return new RankTimes(gradientNs, allReduceNs, updateNs, wall, firstLoss, lastLoss);
            } finally {
                bootstrap.barrier(); // every rank is past its last collective before device memory is freed
                trainer.close();
            }
        }
    }
}
