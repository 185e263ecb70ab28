// Kernels for GpuFloorsBench: the physical floors one small collective builds on, measured on the
// machine the collectives run on. Nothing here is used by a collective.
//
//   floor_null      an empty kernel: what a launch (and its synchronize) costs with no work at all
//   floor_null_done an empty kernel that writes a done word into mapped host memory, as a collective does
//                   (the host then spins on that word instead of calling cuStreamSynchronize)
//   floor_echo      a kernel that is already running and answers a doorbell: host -> GPU -> host through
//                   mapped pinned memory, the resident kernel's path without its work
//   floor_pingpong  two blocks passing a flag back and forth through global memory: the GPU-side cost of
//                   one dependent step between two ranks of one GPU (as one-shot inboxes see it)

// The engine's own memory helpers (ld.acquire.sys, st.release.sys, the global timer), so that the floors
// use the instructions the collectives use; only the GPU-scope variants are added here.
#include "../../../../ipc/src/main/cuda/common.cuh"

__device__ __forceinline__ uint64_t ldRelaxedGpu(const volatile uint64_t* p) {
    uint64_t v;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void stRelaxedGpu(volatile uint64_t* p, uint64_t v) {
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

extern "C" __global__ void floor_null() {}

extern "C" __global__ void floor_null_done(volatile uint64_t* done, uint64_t value) {
    if (threadIdx.x == 0) stReleaseSys(done, value);
}

// bell[0]: the host's sequence number (STOP ends the kernel); reply[0]: the kernel's answer. One
// thread polls the doorbell with system-scope acquire loads (each one a PCIe read of host memory) and
// answers with a system-scope release store (a posted PCIe write). Ends after timeoutNs without news.
#define FLOOR_STOP 0xffffffffffffffffull
extern "C" __global__ void floor_echo(volatile uint64_t* bell, volatile uint64_t* reply, uint64_t timeoutNs) {
    if (threadIdx.x != 0) return;
    uint64_t last = 0;
    uint64_t since = globalTimerNs();
    while (true) {
        const uint64_t seq = ldAcquireSys(bell);
        if (seq == FLOOR_STOP) break;
        if (seq != last) {
            stReleaseSys(reply, seq);
            last = seq;
            since = globalTimerNs();
        } else if (globalTimerNs() - since > timeoutNs) {
            break;
        }
    }
}

// flags: two u64 words 128 bytes apart (device memory, zeroed); times[0] = ns for rounds round trips
// as block 0 saw them. Block 0 sends i, block 1 answers i; gpuScope: relaxed gpu-scope loads and stores
// (what two ranks on one GPU need), else system-scope acquire / release (what host-visible words cost).
extern "C" __global__ void floor_pingpong(volatile uint64_t* flags, uint64_t rounds, uint64_t* times, int gpuScope) {
    if (threadIdx.x != 0) return;
    volatile uint64_t* ping = flags;
    volatile uint64_t* pong = flags + 16;
    if (blockIdx.x == 0) {
        const uint64_t t0 = globalTimerNs();
        for (uint64_t i = 1; i <= rounds; i++) {
            if (gpuScope) {
                stRelaxedGpu(ping, i);
                while (ldRelaxedGpu(pong) != i) {}
            } else {
                stReleaseSys(ping, i);
                while (ldAcquireSys(pong) != i) {}
            }
        }
        times[0] = globalTimerNs() - t0;
    } else {
        for (uint64_t i = 1; i <= rounds; i++) {
            if (gpuScope) {
                while (ldRelaxedGpu(ping) != i) {}
                stRelaxedGpu(pong, i);
            } else {
                while (ldAcquireSys(ping) != i) {}
                stReleaseSys(pong, i);
            }
        }
    }
}
