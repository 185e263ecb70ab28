// The resident one-shot kernel (sccl_oneshot_resident, ResidentKernel.java) and its doorbell in mapped
// host memory: LL lines like every one-shot call (one_shot.cuh). It is one kernel for every data type
// (it switches on CollArgs.type), so it is defined here whole, not stamped per type in ring_kernels.cu.

#pragma once

#include "one_shot.cuh"

// ---- The resident one-shot kernel: small all-reduces without a launch per call. -------------------
//
// One block that stays on the GPU between calls and polls a doorbell in mapped host memory
// (ResidentDoorbell.java): the host writes the call's CollArgs, then the call's sequence number; the
// kernel runs the one-shot all-reduce of that type, reports completion exactly as a launched kernel
// does (the done word of the host status block), and polls again. It ends by itself after idleNs
// without a call (so that cuMemFree elsewhere in the process, which waits for the GPU, is held at most
// that long), when the host asks it to stop, or after an abort; it then writes the last sequence number
// it saw into the doorbell's exit word, and the host launches it again for the next call.
struct ResidentArgs {
    uint64_t comm;      // DevComm* in device memory
    uint64_t doorbell;  // device pointer of the mapped host doorbell
    uint64_t lastSeq;   // the sequence number of the last call completed before this launch
    uint64_t idleNs;
};
static_assert(sizeof(ResidentArgs) == 32, "ResidentArgs layout");
// Doorbell words (u64 index): [0] sequence number to run (2^32: stop), [1] exit word (0 while running,
// then 1 + the last sequence number seen), the call's CollArgs at byte 64.
enum { BELL_SEQ = 0, BELL_EXIT = 1, BELL_ARGS_BYTE = 64 };
#define BELL_STOP 0x100000000ull

extern "C" __global__ void __launch_bounds__(SCCL_MAX_THREADS) sccl_oneshot_resident(ResidentArgs ra) {
    __shared__ volatile int abortedShared;
    __shared__ __align__(16) CollArgs args;
    __shared__ uint64_t next;
    const DevComm* comm = (const DevComm*)ra.comm;
    volatile uint64_t* bell = (volatile uint64_t*)ra.doorbell;
    uint64_t last = ra.lastSeq;
    uint64_t idleSince = globalTimerNs();
    volatile int32_t* hostStatus = (volatile int32_t*)comm->hostStatus;
    while (true) {
        if (threadIdx.x == 0) {
            uint64_t seq = last;
            int spins = 0;
            while (true) {
                seq = ldAcquireSys(bell + BELL_SEQ);
                if (seq != last) break;
                if ((++spins & 255) == 0) {
                    if (hostStatus[0] != 0 || *(volatile uint32_t*)comm->myState != 0
                            || globalTimerNs() - idleSince > ra.idleNs) {
                        break;
                    }
                }
            }
            next = seq;
        }
        __syncthreads();
        const uint64_t seq = next;
        if (seq == last || seq == BELL_STOP) break;  // idle, aborted or asked to stop
        // The arguments, 96 bytes of host memory, as six 16-byte loads by six threads at once: one thread
        // reading them word by word paid a PCIe round trip per word (~25 us per call). Thread 0's acquire
        // of the sequence number and the barrier order these loads after the host's writes.
        constexpr int ARG_VECS = (int)(sizeof(CollArgs) / 16);
        if (threadIdx.x < ARG_VECS) {
            ((uint4*)&args)[threadIdx.x] = ldVolatile16((const char*)ra.doorbell + BELL_ARGS_BYTE + 16 * threadIdx.x);
        }
        __syncthreads();
        const CollArgs a = args;
        Waiter w = startKernel(comm, &abortedShared, a.ticket);
        switch (a.type) {
            case 0: oneShotBody<RedF32>(a, comm, w); break;
            case 1: oneShotBody<RedF64>(a, comm, w); break;
            case 2: oneShotBody<RedF16>(a, comm, w); break;
            case 3: oneShotBody<RedBF16>(a, comm, w); break;
            case 4: oneShotBody<RedI32>(a, comm, w); break;
            case 5: oneShotBody<RedI64>(a, comm, w); break;
            case 6: oneShotBody<RedI8>(a, comm, w); break;
            default: oneShotBody<RedU8>(a, comm, w); break;
        }
        if (threadIdx.x == 0) {
            countCall(comm, true);  // oneShotBody ended with a barrier: every thread has read the numbers
            __threadfence_system();
            reportDone(hostStatus, a.ticket);
        }
        last = seq;
        idleSince = globalTimerNs();
        const bool stop = *w.aborted;
        __syncthreads();
        if (stop) break;
    }
    if (threadIdx.x == 0) stReleaseSys(bell + BELL_EXIT, last + 1);
}
