package org.sparkccl.train.gpu;

import jcuda.Pointer;
import jcuda.driver.JCudaDriver;
import org.sparkccl.ipc.cuda.Cuda;
import org.sparkccl.ipc.cuda.CudaStream;
import org.sparkccl.ipc.cuda.KernelModule;

/**
 * The entry points of train_kernels.cu, one Java method each with the kernel's parameters, queued on
 * one stream. Addresses are device pointers (0 for an optional one the kernel may skip); nothing
 * waits here: the caller synchronizes the stream where it needs results.
 */
final class TrainKernels {
    /** The fatbin built from train/src/main/cuda/train_kernels.cu. */
    static final String RESOURCE = "/org/sparkccl/train/gpu/sparkccl_train.fatbin";
    private static final int TILE = 16;
    /** Threads per block; train_batch_totals needs exactly its TOTALS_THREADS (256). */
    private static final int THREADS = 256;

    private final KernelModule module;
    private final CudaStream stream;
    private final String where;

    TrainKernels(CudaStream stream, String where) {
        this.module = KernelModule.forDevice(stream.device(), RESOURCE);
        this.stream = stream;
        this.where = where;
    }

    /**
     * {@code C = act(a(A) b(B) + bias)}, M x N with inner size K; see train_matmul. {@code rowIndex}
     * (or 0) maps A's memory rows, which are m, or k when {@code transA}.
     */
    void matmul(long a, long rowIndex, int lda, boolean transA, long b, int ldb, boolean transB, long c, int ldc,
                long bias, boolean tanh, int m, int n, int k) {
        launch("train_matmul", blocks(n, TILE), blocks(m, TILE), TILE, TILE,
                ptr(a), ptr(rowIndex), i32(lda), i32(transA ? 1 : 0), ptr(b), i32(ldb), i32(transB ? 1 : 0),
                ptr(c), i32(ldc), ptr(bias), i32(tanh ? 1 : 0), i32(m), i32(n), i32(k));
    }

    /** Losses of {@code rows} rows of logits into {@code loss}; the logits become dLoss/dz. */
    void softmaxCrossEntropy(long logits, int classes, long labels, long rowIndex, int rows, long loss) {
        launch("train_softmax_xent", blocks(rows, THREADS), 1, THREADS, 1,
                ptr(logits), i32(classes), ptr(labels), ptr(rowIndex), i32(rows), ptr(loss));
    }

    /** {@code out[c] = sum_r x[r][c]}. */
    void columnSums(long x, int rows, int cols, long out) {
        launch("train_column_sums", blocks(cols, THREADS), 1, THREADS, 1, ptr(x), i32(rows), i32(cols), ptr(out));
    }

    /** {@code dh[i] *= 1 - h[i]^2}. */
    void tanhBackward(long dh, long h, long n) {
        launch("train_tanh_backward", blocks(n, THREADS), 1, THREADS, 1, ptr(dh), ptr(h), i64(n));
    }

    /** {@code totals = {sum of loss[0 .. rows), rows}}. */
    void batchTotals(long loss, int rows, long totals) {
        launch("train_batch_totals", 1, 1, THREADS, 1, ptr(loss), i32(rows), ptr(totals));
    }

    void momentumSgd(long w, long g, long v, long n, float rows, float learningRate, float momentum) {
        launch("train_momentum_sgd", blocks(n, THREADS), 1, THREADS, 1, ptr(w), ptr(g), ptr(v), i64(n), f32(rows),
                f32(learningRate), f32(momentum));
    }

    void adam(long w, long g, long m, long v, long n, float rows, double learningRate, double beta1, double beta2,
              double epsilon, double correction1, double correction2) {
        launch("train_adam", blocks(n, THREADS), 1, THREADS, 1, ptr(w), ptr(g), ptr(m), ptr(v), i64(n), f32(rows),
                f64(learningRate), f64(beta1), f64(beta2), f64(epsilon), f64(correction1), f64(correction2));
    }

    private void launch(String kernel, int gridX, int gridY, int blockX, int blockY, Pointer... args) {
        Cuda.check(JCudaDriver.cuLaunchKernel(module.function(kernel), gridX, gridY, 1, blockX, blockY, 1, 0,
                stream.handle(), Pointer.to(args), null), "cuLaunchKernel(" + kernel + ", grid " + gridX + "x" + gridY
                + ")", where);
    }

    private static int blocks(long n, int perBlock) {
        long b = (n + perBlock - 1) / perBlock;
        if (b < 1 || b > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("a launch over " + n + " elements (" + b + " blocks)");
        }
        return (int) b;
    }

    // Kernel parameters: each points at a value of the kernel parameter's size (pointers are 8 bytes).

    private static Pointer ptr(long deviceAddress) {
        return Pointer.to(new long[] {deviceAddress});
    }

    private static Pointer i32(int v) {
        return Pointer.to(new int[] {v});
    }

    private static Pointer i64(long v) {
        return Pointer.to(new long[] {v});
    }

    private static Pointer f32(float v) {
        return Pointer.to(new float[] {v});
    }

    private static Pointer f64(double v) {
        return Pointer.to(new double[] {v});
    }
}
