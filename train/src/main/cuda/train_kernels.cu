// sparkccl training kernels: forward and backward passes of TrainJob's two models (softmax
// regression, and the one-hidden-layer tanh MLP) and the optimizer updates (momentum SGD, Adam),
// run by org.sparkccl.train.gpu.GpuModelTrainer.
//
// Plain CUDA, no cuBLAS: JCuda's cuBLAS binding (jcublas 12.0.0) needs libcublas.so.12, the GPU
// machines have CUDA 13 only, and carrying 100+ MB of cuBLAS for matrices of 64 x 32 is not worth
// it. One shared-memory tiled matrix product covers every product of these models; everything is
// bounds-checked and deterministic (no atomics: every output element is summed by one thread in a
// fixed order), so ranks and reruns agree bit for bit.
//
// Layouts are row-major, as the Java models keep them: a minibatch is `rows` gathered rows of the
// shard's feature matrix X [shardRows, inputs]; weights W [in, out] are read as w[i * out + j].
//
// Built into its own fatbin (sparkccl_train.fatbin) by build-kernels.sh.

#include <stdint.h>
#include <math.h>

#define TILE 16

// a(m, k) of train_matmul: A's memory row is m (transA == 0) or k (transA == 1), looked up in
// rowIndex when it is given; the memory column is the other index.
__device__ __forceinline__ float load_a(const float* A, const int* rowIndex, int lda, int transA, int m, int k) {
    int row = transA ? k : m;
    int col = transA ? m : k;
    if (rowIndex != nullptr) {
        row = rowIndex[row];
    }
    return A[(size_t) row * lda + col];
}

// b(k, n) of train_matmul: B[k * ldb + n], or B[n * ldb + k] when transB.
__device__ __forceinline__ float load_b(const float* B, int ldb, int transB, int k, int n) {
    return transB ? B[(size_t) n * ldb + k] : B[(size_t) k * ldb + n];
}

// C[m * ldc + n] = act(sum_k a(m, k) * b(k, n) + bias[n]) for m < M, n < N (bias may be null;
// act 0: none, 1: tanh). K may be 0 (C is then act(bias)). Block TILE x TILE threads, grid
// (ceil(N / TILE), ceil(M / TILE)). Used as:
//   forward         Y = X[rows] W + b        A = X gathered by rowIndex
//   weight gradient dW = X[rows]^T dY        transA, A = X gathered by rowIndex, K = rows
//   back-propagate  dX = dY W^T              transB
extern "C" __global__ void train_matmul(const float* A, const int* rowIndex, int lda, int transA,
                                        const float* B, int ldb, int transB,
                                        float* C, int ldc, const float* bias, int act,
                                        int M, int N, int K) {
    __shared__ float as[TILE][TILE + 1]; // as[m][k] of this block's rows
    __shared__ float bs[TILE][TILE + 1]; // bs[k][n] of this block's columns
    int tx = threadIdx.x;
    int ty = threadIdx.y;
    int m = blockIdx.y * TILE + ty;
    int n = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        int ak = k0 + tx;
        as[ty][tx] = (m < M && ak < K) ? load_a(A, rowIndex, lda, transA, m, ak) : 0.0f;
        int bk = k0 + ty;
        bs[ty][tx] = (bk < K && n < N) ? load_b(B, ldb, transB, bk, n) : 0.0f;
        __syncthreads();
        for (int kk = 0; kk < TILE; kk++) {
            acc += as[ty][kk] * bs[kk][tx];
        }
        __syncthreads();
    }
    if (m < M && n < N) {
        if (bias != nullptr) {
            acc += bias[n];
        }
        if (act == 1) {
            acc = tanhf(acc);
        }
        C[(size_t) m * ldc + n] = acc;
    }
}

// For each of `rows` rows of logits Z [rows, classes]: loss[r] = cross-entropy of the row's label
// (labels[rowIndex[r]]), and the row becomes dLoss/dz = softmax(z) - onehot(label). One thread per
// row. The loss is log(sum exp(z - max)) - (z[label] - max): no probability is rounded to 0 first.
// Labels were checked on the host (0 <= label < classes) when the shard was loaded.
extern "C" __global__ void train_softmax_xent(float* Z, int classes, const int* labels, const int* rowIndex,
                                              int rows, float* loss) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) {
        return;
    }
    float* z = Z + (size_t) r * classes;
    int label = labels[rowIndex != nullptr ? rowIndex[r] : r];
    float max = z[0];
    for (int c = 1; c < classes; c++) {
        max = fmaxf(max, z[c]);
    }
    float sum = 0.0f;
    for (int c = 0; c < classes; c++) {
        sum += expf(z[c] - max);
    }
    loss[r] = logf(sum) - (z[label] - max);
    for (int c = 0; c < classes; c++) {
        z[c] = expf(z[c] - max) / sum;
    }
    z[label] -= 1.0f;
}

// out[c] = sum over r < rows of X[r * cols + c]: bias gradients. One thread per column.
extern "C" __global__ void train_column_sums(const float* X, int rows, int cols, float* out) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) {
        return;
    }
    float acc = 0.0f;
    for (int r = 0; r < rows; r++) {
        acc += X[(size_t) r * cols + c];
    }
    out[c] = acc;
}

// dH[i] *= 1 - H[i]^2: back through tanh, whose output H is.
extern "C" __global__ void train_tanh_backward(float* dH, const float* H, long long n) {
    long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float h = H[i];
        dH[i] *= 1.0f - h * h;
    }
}

#define TOTALS_THREADS 256

// totals[0] = sum of loss[0 .. rows), totals[1] = rows: the two numbers that ride along with the
// gradient in the all-reduce. One block of TOTALS_THREADS threads; a fixed reduction tree.
extern "C" __global__ void train_batch_totals(const float* loss, int rows, float* totals) {
    __shared__ float partial[TOTALS_THREADS];
    int t = threadIdx.x;
    float acc = 0.0f;
    for (int r = t; r < rows; r += TOTALS_THREADS) {
        acc += loss[r];
    }
    partial[t] = acc;
    __syncthreads();
    for (int half = TOTALS_THREADS / 2; half > 0; half /= 2) {
        if (t < half) {
            partial[t] += partial[t + half];
        }
        __syncthreads();
    }
    if (t == 0) {
        totals[0] = partial[0];
        totals[1] = (float) rows;
    }
}

// The optimizers take the all-reduced gradient sums g and the global row count, and round exactly
// as the Java optimizers of spark-plugin do (float there, double in Adam): the _rn intrinsics keep
// nvcc from fusing a multiply and an add, which Java never does.

// Heavy-ball momentum, float: v = mu v + g / rows; w -= lr v.
extern "C" __global__ void train_momentum_sgd(float* w, const float* g, float* v, long long n, float rows,
                                              float lr, float mu) {
    long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float mean = g[i] / rows;
        float vi = __fadd_rn(__fmul_rn(mu, v[i]), mean);
        v[i] = vi;
        w[i] = __fsub_rn(w[i], __fmul_rn(lr, vi));
    }
}

// Adam with bias correction; moments kept in float, arithmetic in double (as Adam.java).
// correction1 = 1 - beta1^step, correction2 = 1 - beta2^step, computed on the host.
extern "C" __global__ void train_adam(float* w, const float* g, float* m, float* v, long long n, float rows,
                                      double lr, double beta1, double beta2, double epsilon,
                                      double correction1, double correction2) {
    long long i = (long long) blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float mean = g[i] / rows;
        double gd = (double) mean;
        float mi = (float) __dadd_rn(__dmul_rn(beta1, (double) m[i]), __dmul_rn(1.0 - beta1, gd));
        float vi = (float) __dadd_rn(__dmul_rn(beta2, (double) v[i]), __dmul_rn(__dmul_rn(1.0 - beta2, gd), gd));
        m[i] = mi;
        v[i] = vi;
        double mHat = __ddiv_rn((double) mi, correction1);
        double vHat = __ddiv_rn((double) vi, correction2);
        float step = (float) __ddiv_rn(__dmul_rn(lr, mHat), __dadd_rn(__dsqrt_rn(vHat), epsilon));
        w[i] = __fsub_rn(w[i], step);
    }
}
