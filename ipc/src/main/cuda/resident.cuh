// The resident one-shot kernel (sccl_oneshot_resident, ResidentKernel.java) and its doorbell in mapped
// host memory: LL lines like every one-shot call (one_shot.cuh). It is one kernel for every data type
// (it switches on CollArgs.type), so it is defined here whole, not stamped per type in ring_kernels.cu.

#pragma once

#include "one_shot.cuh"

// ---- The resident one-shot kernel: small all-reduces without a launch per call. -------------------
//
// One block that stays on the GPU between calls and polls a doorbell in mapped host memory
// (ResidentKernel.java): the host writes the call, as four LL lines of 8 bytes of data and two copies
// of the call's sequence number each, into one 64-byte line of host memory; the kernel runs the
// one-shot all-reduce of that type, reports completion exactly as a launched kernel does (the done
// word of the host status block), and polls again. Each poll is one PCIe read (four lanes, 16 bytes
// each, in flight together) that brings the sequence number and the arguments at once: a line is
// taken only when all eight flags carry the same new number, so a doorbell the host is still writing
// is never read half old, half new (each 8-byte word the host stores is atomic, as in LL). It ends by
// itself after idleNs without a call (so that cuMemFree elsewhere in the process, which waits for the
// GPU, is held at most that long), when the host asks it to stop (every flag BELL_STOP_FLAG), or after
// an abort; it then writes the last sequence number it saw into the doorbell's exit word, and the host
// launches it again for the next call.
struct ResidentArgs {
    uint64_t comm;      // DevComm* in device memory
    uint64_t doorbell;  // device pointer of the mapped host doorbell
    uint64_t lastSeq;   // the sequence number of the last call completed before this launch
    uint64_t idleNs;
};
static_assert(sizeof(ResidentArgs) == 32, "ResidentArgs layout");
// Doorbell (ResidentKernel.java): four LL lines {data lo, flag, data hi, flag} at bytes 0-63 - line 0 the
// send pointer, 1 the recv pointer, 2 {count, ticket}, 3 {type | op << 8 | proto << 16 | kind << 24,
// root} - and the exit word (u64) at byte 128: 0 while running, then 1 + the last sequence number seen.
enum { BELL_LINES = 4, BELL_EXIT_BYTE = 128 };
#define BELL_STOP_FLAG 0xffffffffu

extern "C" __global__ void __launch_bounds__(SCCL_MAX_THREADS) sccl_oneshot_resident(ResidentArgs ra) {
    __shared__ volatile int abortedShared;
    __shared__ uint4 bellLines[BELL_LINES];
    __shared__ uint32_t next;
    const DevComm* comm = (const DevComm*)ra.comm;
    const uint4* bell = (const uint4*)ra.doorbell;
    uint32_t last = (uint32_t)ra.lastSeq;
    uint64_t idleSince = globalTimerNs();
    volatile int32_t* hostStatus = (volatile int32_t*)comm->hostStatus;
    // Once for the kernel's life: an abort ends it, so nothing ever clears it again.
    if (threadIdx.x == 0) abortedShared = 0;
    __shared__ uint64_t bellNs;
    while (true) {
        if (threadIdx.x < 32) {
            // Warp 0: lanes 0-3 read one line each per poll; the warp agrees on what it saw.
            const int lane = threadIdx.x;
            uint32_t seq = last;
            int spins = 0;
            while (true) {
                uint4 v = make_uint4(0, 0, 0, 0);
                if (lane < BELL_LINES) v = ldVolatile16(bell + lane);
                const uint32_t f = __shfl_sync(0xffffffffu, v.y, 0);
                const bool same = lane >= BELL_LINES || (v.y == f && v.w == f);
                if (__all_sync(0xffffffffu, same) && f != last) {
                    seq = f;
                    if (lane < BELL_LINES) bellLines[lane] = v;
                    break;
                }
                if ((++spins & 255) == 0) {
                    int stop = 0;
                    if (lane == 0) {
                        stop = hostStatus[0] != 0 || *(volatile uint32_t*)comm->myState != 0
                               || globalTimerNs() - idleSince > ra.idleNs;
                    }
                    if (__shfl_sync(0xffffffffu, stop, 0)) break;
                }
            }
            if (lane == 0) {
                next = seq;
                bellNs = globalTimerNs();
            }
        }
        __syncthreads();
        const uint32_t seq = next;
        if (seq == last || seq == BELL_STOP_FLAG) break;  // idle, aborted or asked to stop
        CollArgs a;
        a.comm = ra.comm;
        a.send = ((uint64_t)bellLines[0].z << 32) | bellLines[0].x;
        a.recv = ((uint64_t)bellLines[1].z << 32) | bellLines[1].x;
        a.count = bellLines[2].x;
        a.ticket = bellLines[2].z;
        a.type = bellLines[3].x & 0xff;
        a.op = (bellLines[3].x >> 8) & 0xff;
        a.proto = (bellLines[3].x >> 16) & 0xff;
        a.kind = bellLines[3].x >> 24;
        a.root = bellLines[3].z;
        a.blockElems = a.totalElems = a.chunkElems = a.sliceElems = 0;
        a.nchannels = 1;
        a.flags = 0;
        // No barrier and no abort check here: the doorbell's barrier above is the call's start, and
        // oneShotBody checks the abort word with its first reads.
        const uint64_t startNs = globalTimerNs();
        Waiter w = makeWaiter(comm, &abortedShared, a.ticket, startNs);
        if (threadIdx.x == 0) *(volatile uint64_t*)(hostStatus + STATUS_WORD_START_NS) = startNs;
        OneShotStamps t = {startNs, bellNs, 0, 0, 0};
        CallNumbers calls;
        switch (a.type) {
            case 0: calls = oneShotBody<RedF32>(a, comm, w, t); break;
            case 1: calls = oneShotBody<RedF64>(a, comm, w, t); break;
            case 2: calls = oneShotBody<RedF16>(a, comm, w, t); break;
            case 3: calls = oneShotBody<RedBF16>(a, comm, w, t); break;
            case 4: calls = oneShotBody<RedI32>(a, comm, w, t); break;
            case 5: calls = oneShotBody<RedI64>(a, comm, w, t); break;
            case 6: calls = oneShotBody<RedI8>(a, comm, w, t); break;
            default: calls = oneShotBody<RedU8>(a, comm, w, t); break;
        }
        if (threadIdx.x == 0) {
            countCall(comm, calls, true);  // oneShotBody ended with a barrier: every thread has read the numbers
            // A full system fence before the report, not only the done word's release (as the launched
            // kernels' blocks fence in finish): the one run without it (4 ranks as threads on one H200,
            // in-place calls of 1-5 KB) read old data in the block's last-written lines (those of the
            // threads' second pass) after the done word, most likely because the release orders only what
            // this thread wrote and saw, not the other threads' stores the barrier above ordered before it.
            // The done word is then a plain strong store: fence + store is the release, once.
            __threadfence_system();
            const uint64_t endNs = globalTimerNs();
            reportDoneFenced(hostStatus, a.ticket, endNs);
            storeProbes(comm, calls, t, endNs);
        }
        last = seq;
        idleSince = globalTimerNs();
        // Every thread passed oneShotBody's last barrier after any abort was raised in it, so all agree;
        // warp 0 may already poll again while the others read this (they read bellLines before it).
        if (*w.aborted) break;
    }
    if (threadIdx.x == 0) stReleaseSys((volatile uint64_t*)((const char*)ra.doorbell + BELL_EXIT_BYTE), (uint64_t)last + 1);
}
