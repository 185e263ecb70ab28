// launch_floor.cu - the host cost of queueing one small kernel, from C++, with no JVM in between:
// the floor under sparkccl's stream-ordered calls (issue 25), beside GpuFloorsBench's JCuda and JNA
// numbers for the same calls. Each line is the median over SAMPLES of the mean host time of N calls
// queued back to back (the stream is drained between samples, untimed).
// Build: nvcc -O2 -arch=sm_90 -o launch_floor scripts/launch_floor.cu (no -lcuda: the driver's calls come
// through cudaGetDriverEntryPointByVersion, so it builds where there is no libcuda, as on our VMs).
#include <cuda.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <thread>
#include <vector>

static const int N = 1000;
static const int SAMPLES = 30;

__global__ void null_kernel(int *p) {
    if (p != nullptr && threadIdx.x == 1024) *p = 1;  // never taken; keeps the parameter
}

// A kernel launched with programmatic stream serialization waits for its predecessor here.
__global__ void pdl_kernel(int *p) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    if (p != nullptr && threadIdx.x == 1024) *p = 1;
}

// The driver calls timed here, taken from the driver that the runtime loaded.
static decltype(&cuLaunchKernel) launchKernel;
static decltype(&cuLaunchKernelEx) launchKernelEx;
static CUresult (*execKernelNodeSetParams)(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS_v2 *);
static CUresult (*driverGraphLaunch)(CUgraphExec, CUstream);

template <typename F>
static void entry(F *fn, const char *name) {
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion(name, (void **) fn, 12000, cudaEnableDefault, &q) != cudaSuccess
        || q != cudaDriverEntryPointSuccess) {
        fprintf(stderr, "no driver entry point %s\n", name);
        exit(1);
    }
}

static void check(cudaError_t e, const char *what) {
    if (e != cudaSuccess) { fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e)); exit(1); }
}
static void checkDrv(CUresult r, const char *what) {
    if (r != CUDA_SUCCESS) { fprintf(stderr, "%s: CUresult %d\n", what, (int) r); exit(1); }
}

// Median over SAMPLES of the per-call host time (us) of N calls of queue(), draining the stream after each sample.
static double timeQueued(const std::function<void()> &queue, cudaStream_t s) {
    std::vector<double> us;
    for (int i = -3; i < SAMPLES; i++) {
        auto t0 = std::chrono::steady_clock::now();
        for (int k = 0; k < N; k++) queue();
        auto t1 = std::chrono::steady_clock::now();
        check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
        if (i >= 0) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / N);
    }
    std::sort(us.begin(), us.end());
    return us[us.size() / 2];
}

// The same with the GPU's side: per call from the first queued to the stream drained.
static double timeDrained(const std::function<void()> &queue, cudaStream_t s) {
    std::vector<double> us;
    for (int i = -3; i < SAMPLES; i++) {
        auto t0 = std::chrono::steady_clock::now();
        for (int k = 0; k < N; k++) queue();
        check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
        auto t1 = std::chrono::steady_clock::now();
        if (i >= 0) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / N);
    }
    std::sort(us.begin(), us.end());
    return us[us.size() / 2];
}

int main() {
    check(cudaSetDevice(0), "cudaSetDevice");
    check(cudaFree(nullptr), "context");
    entry(&launchKernel, "cuLaunchKernel");
    entry(&launchKernelEx, "cuLaunchKernelEx");
    entry(&execKernelNodeSetParams, "cuGraphExecKernelNodeSetParams");
    entry(&driverGraphLaunch, "cuGraphLaunch");
    cudaStream_t s, s2;
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
    check(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking), "stream");
    int *p = nullptr;

    auto runtimeLaunch = [&] { null_kernel<<<1, 32, 0, s>>>(p); };
    printf("CFLOOR runtime <<<>>> alone, queued back to back: %.2f us\n", timeQueued(runtimeLaunch, s));
    printf("CFLOOR runtime <<<>>> queued, per call to drained: %.2f us\n", timeDrained(runtimeLaunch, s));

    CUfunction f;
    check(cudaGetFuncBySymbol(&f, (const void *) null_kernel), "cudaGetFuncBySymbol");
    void *args[] = {&p};
    auto driverLaunch = [&] { checkDrv(launchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, args, nullptr), "cuLaunchKernel"); };
    printf("CFLOOR driver cuLaunchKernel alone, queued back to back: %.2f us\n", timeQueued(driverLaunch, s));

    CUfunction fp;
    check(cudaGetFuncBySymbol(&fp, (const void *) pdl_kernel), "cudaGetFuncBySymbol");
    CUlaunchAttribute attr = {};
    attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig cfg = {};
    cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = 32; cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.hStream = s;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    auto exLaunch = [&] { checkDrv(launchKernelEx(&cfg, fp, args, nullptr), "cuLaunchKernelEx"); };
    printf("CFLOOR driver cuLaunchKernelEx (programmatic) alone, queued back to back: %.2f us\n", timeQueued(exLaunch, s));
    printf("CFLOOR driver cuLaunchKernelEx (programmatic) queued, per call to drained: %.2f us\n", timeDrained(exLaunch, s));

    cudaGraph_t g;
    cudaGraphExec_t ge;
    check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "capture");
    null_kernel<<<1, 32, 0, s>>>(p);
    check(cudaStreamEndCapture(s, &g), "end capture");
    check(cudaGraphInstantiate(&ge, g, 0), "instantiate");
    auto graphLaunch = [&] { check(cudaGraphLaunch(ge, s), "cudaGraphLaunch"); };
    printf("CFLOOR graph of 1 kernel, cudaGraphLaunch alone, queued back to back: %.2f us\n", timeQueued(graphLaunch, s));
    printf("CFLOOR graph of 1 kernel, cudaGraphLaunch queued, per call to drained: %.2f us\n", timeDrained(graphLaunch, s));

    // One graph of one kernel node whose parameters are rewritten before every launch: a stream-ordered call
    // of any shape through one instantiated graph (GraphLaunch).
    cudaGraphNode_t node;
    size_t nodes = 1;
    check(cudaGraphGetNodes(g, &node, &nodes), "cudaGraphGetNodes");
    CUDA_KERNEL_NODE_PARAMS_v2 kp = {};  // zeroed kern and ctx: func is used (a v1 reader ignores them)
    kp.func = f;
    kp.gridDimX = kp.gridDimY = kp.gridDimZ = 1;
    kp.blockDimX = 32; kp.blockDimY = kp.blockDimZ = 1;
    kp.kernelParams = args;
    auto setAndLaunch = [&] {
        checkDrv(execKernelNodeSetParams((CUgraphExec) ge, (CUgraphNode) node, &kp), "cuGraphExecKernelNodeSetParams");
        checkDrv(driverGraphLaunch((CUgraphExec) ge, s), "cuGraphLaunch");
    };
    printf("CFLOOR graph of 1 kernel, cuGraphExecKernelNodeSetParams + cuGraphLaunch, queued back to back: %.2f us\n",
           timeQueued(setAndLaunch, s));
    printf("CFLOOR graph of 1 kernel, cuGraphExecKernelNodeSetParams + cuGraphLaunch, per call to drained: %.2f us\n",
           timeDrained(setAndLaunch, s));

    // Two threads of one process, each launching into its own stream of the one context (two ranks as threads).
    for (int pdl = 0; pdl <= 1; pdl++) {
        double per[2];
        auto worker = [&](int t) {
            check(cudaSetDevice(0), "cudaSetDevice");
            cudaStream_t st = t == 0 ? s : s2;
            CUlaunchConfig c = cfg;
            c.hStream = st;
            auto one = [&] {
                if (pdl) checkDrv(launchKernelEx(&c, fp, args, nullptr), "cuLaunchKernelEx");
                else checkDrv(launchKernel(f, 1, 1, 1, 32, 1, 1, 0, st, args, nullptr), "cuLaunchKernel");
            };
            per[t] = timeQueued(one, st);
        };
        std::thread a(worker, 0), b(worker, 1);
        a.join();
        b.join();
        printf("CFLOOR 2 threads at once, %s alone, queued back to back, per call: %.2f / %.2f us\n",
               pdl ? "cuLaunchKernelEx (programmatic)" : "cuLaunchKernel", per[0], per[1]);
    }
    {
        cudaGraphExec_t ge2;
        check(cudaGraphInstantiate(&ge2, g, 0), "instantiate");
        double per[2];
        auto worker = [&](int t) {
            check(cudaSetDevice(0), "cudaSetDevice");
            cudaStream_t st = t == 0 ? s : s2;
            CUgraphExec e = (CUgraphExec) (t == 0 ? ge : ge2);
            auto one = [&] {
                checkDrv(execKernelNodeSetParams(e, (CUgraphNode) node, &kp), "cuGraphExecKernelNodeSetParams");
                checkDrv(driverGraphLaunch(e, st), "cuGraphLaunch");
            };
            per[t] = timeQueued(one, st);
        };
        std::thread a(worker, 0), b(worker, 1);
        a.join();
        b.join();
        printf("CFLOOR 2 threads at once, cuGraphExecKernelNodeSetParams + cuGraphLaunch, queued back to back, per call: %.2f / %.2f us\n",
               per[0], per[1]);
        check(cudaGraphExecDestroy(ge2), "destroy");
    }
    check(cudaGraphExecDestroy(ge), "destroy");
    check(cudaGraphDestroy(g), "destroy");
    check(cudaStreamDestroy(s), "destroy");
    check(cudaStreamDestroy(s2), "destroy");
    return 0;
}
