// sparkccl's GPU ring collectives: one persistent kernel per rank and collective runs the whole
// ring (reduce-scatter then all-gather for AllReduce), one block per channel, polling flags in
// memory that its ring neighbours write: the next rank's receive buffers (device memory mapped
// through CUDA IPC or peer access, or host memory registered with the GPU for the staged path).
//
// The wire formats are those of the CPU engine (org.sparkccl.core.proto), one header per protocol as
// NCCL splits its src/device: prims_ll.cuh, prims_simple.cuh, prims_ll128.cuh, behind the primitives
// of primitives.cuh. This file is the one translation unit build-kernels.sh compiles; it stamps out
// the extern "C" kernels the host loads by name (GpuPlan), one per data type and protocol.
//
//   dev_comm.cuh      layouts shared with the host (DevCommLayout.java), limits, codes
//   common.cuh        memory orderings, reductions, waiting and aborts, every kernel's start and end
//   prims_ll128.cuh   LL128 (Ll128Link)
//   primitives.cuh    Channel: one channel's connection and the primitives (send, recvReduceSend, ...)
//   prims_ll.cuh      LL steps and the collective header
//   prims_simple.cuh  Simple steps
//   ring.cuh          ringKernel: all-reduce, reduce-scatter, all-gather, broadcast, barrier
//   one_shot.cuh      the one-shot all-reduce
//   resident.cuh      the resident one-shot kernel, sccl_oneshot_resident

#include "ring.cuh"
#include "one_shot.cuh"
#include "resident.cuh"

// One kernel per data type and protocol; the op is a parameter, dispatched once per step.
// Names: sccl_ring_<DataType.ncclName()>_<ll|simple>, sccl_oneshot_<DataType.ncclName()>. AllGather
// and Broadcast use uint8 (a copy).
#define SCCL_KERNELS(TNAME, RED)                                                                          \
    extern "C" __global__ void __launch_bounds__(SCCL_MAX_THREADS) sccl_ring_##TNAME##_ll(CollArgs a) {     \
        ringKernel<RED, false>(a);                                                                        \
    }                                                                                                     \
    extern "C" __global__ void __launch_bounds__(SCCL_MAX_THREADS) sccl_ring_##TNAME##_simple(CollArgs a) { \
        ringKernel<RED, true>(a);                                                                         \
    }                                                                                                     \
    extern "C" __global__ void __launch_bounds__(SCCL_MAX_THREADS) sccl_oneshot_##TNAME(CollArgs a) {       \
        oneShotKernel<RED>(a);                                                                            \
    }

SCCL_KERNELS(float, RedF32)
SCCL_KERNELS(double, RedF64)
SCCL_KERNELS(half, RedF16)
SCCL_KERNELS(bfloat16, RedBF16)
SCCL_KERNELS(int32, RedI32)
SCCL_KERNELS(int64, RedI64)
SCCL_KERNELS(int8, RedI8)
SCCL_KERNELS(uint8, RedU8)

// The LL128 ring kernels, sccl_ring_<DataType.ncclName()>_ll128: launched only where every hop of the
// ring is NVLink or within one GPU (GpuTuner). One block per SM (minBlocks 1) lets ptxas give a thread
// 128 registers instead of 64: with 64, Ll128Link::lines spilled 220-580 bytes per thread to local memory
// (ptxas -v, sm_90); with 128, at most 64.
#define SCCL_LL128_KERNEL(TNAME, RED)                                                                         \
    extern "C" __global__ void __launch_bounds__(SCCL_MAX_THREADS, 1) sccl_ring_##TNAME##_ll128(CollArgs a) { \
        ringKernel<RED, false, true>(a);                                                                  \
    }

SCCL_LL128_KERNEL(float, RedF32)
SCCL_LL128_KERNEL(double, RedF64)
SCCL_LL128_KERNEL(half, RedF16)
SCCL_LL128_KERNEL(bfloat16, RedBF16)
SCCL_LL128_KERNEL(int32, RedI32)
SCCL_LL128_KERNEL(int64, RedI64)
SCCL_LL128_KERNEL(int8, RedI8)
SCCL_LL128_KERNEL(uint8, RedU8)
