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

// One call of a resident kernel, from the four LL lines that carried it (both kernels below): the
// arguments, the one-shot all-reduce of that type, and its numbers for the count that ends it.
__device__ __forceinline__ CollArgs residentArgs(uint64_t comm, const uint4* lines) {
    CollArgs a;
    a.comm = comm;
    a.send = ((uint64_t)lines[0].z << 32) | lines[0].x;
    a.recv = ((uint64_t)lines[1].z << 32) | lines[1].x;
    a.count = lines[2].x;
    a.ticket = lines[2].z;
    a.type = lines[3].x & 0xff;
    a.op = (lines[3].x >> 8) & 0xff;
    a.proto = (lines[3].x >> 16) & 0xff;
    a.kind = lines[3].x >> 24;
    a.root = lines[3].z;
    a.blockElems = a.totalElems = a.chunkElems = a.sliceElems = 0;
    a.nchannels = 1;
    a.flags = 0;
    return a;
}

__device__ __forceinline__ CallNumbers residentOneShot(const CollArgs& a, const DevComm* comm, const OneShotPeers& p,
                                                       Waiter& w, OneShotStamps& t, int threads) {
    switch (a.type) {
        case 0: return oneShotBody<RedF32>(a, comm, p, w, t, threads);
        case 1: return oneShotBody<RedF64>(a, comm, p, w, t, threads);
        case 2: return oneShotBody<RedF16>(a, comm, p, w, t, threads);
        case 3: return oneShotBody<RedBF16>(a, comm, p, w, t, threads);
        case 4: return oneShotBody<RedI32>(a, comm, p, w, t, threads);
        case 5: return oneShotBody<RedI64>(a, comm, p, w, t, threads);
        case 6: return oneShotBody<RedI8>(a, comm, p, w, t, threads);
        default: return oneShotBody<RedU8>(a, comm, p, w, t, threads);
    }
}

// Bytes of one element of a data type code (DataType's order, as residentOneShot switches on it).
__device__ __forceinline__ int64_t typeBytes(uint32_t type) {
    return type == 1 || type == 5 ? 8 : type == 0 || type == 4 ? 4 : type == 2 || type == 3 ? 2 : 1;
}

// The threads that take part in one resident call: one per 8-byte line plus the header warp, in whole
// warps, at most the block (what GpuTuner.oneShotThreads gives a launched one-shot block). A small call
// on the whole block paid for every warp: the call's start waited for all of them (0.9 us at 512 threads
// against 0.1 at 64, one H200) and sixteen warps read the same words at once (start -> pushed 2.4 us
// against 1.4), while 64 threads lose at 8 KB (27 us against 5.2 with 512).
__device__ __forceinline__ int residentThreads(const uint4* lines) {
    const int64_t bytes = (int64_t)lines[2].x * typeBytes(lines[3].x & 0xff);
    const int64_t needed = 32 + ((max64(1, (bytes + 7) / 8) + 31) / 32) * 32;
    return (int)min64((int64_t)blockDim.x, needed);
}

extern "C" __global__ void __launch_bounds__(SCCL_MAX_THREADS) sccl_oneshot_resident(ResidentArgs ra) {
    __shared__ volatile int abortedShared;
    __shared__ uint4 bellLines[BELL_LINES];
    // Warp 0's word to the other warps: (calls published << 32) | the threads of the newest call, 0 = end.
    __shared__ volatile unsigned long long callWord;
    __shared__ uint64_t bellNs;
    __shared__ OneShotPeers peers;  // read once for the kernel's life
    const DevComm* comm = (const DevComm*)ra.comm;
    const uint4* bell = (const uint4*)ra.doorbell;
    uint32_t last = (uint32_t)ra.lastSeq;
    uint64_t idleSince = globalTimerNs();
    volatile int32_t* hostStatus = (volatile int32_t*)comm->hostStatus;
    // Once for the kernel's life: an abort ends it, so nothing ever clears it again.
    if (threadIdx.x == 0) {
        abortedShared = 0;
        callWord = 0;
    }
    loadOneShotPeers(comm, peers);
    __syncthreads();
    uint32_t published = 0;  // the calls this thread has seen published (warp 0: has published)
    while (true) {
        int threads;
        if (threadIdx.x < 32) {
            // Warp 0: lanes 0-3 read one line each per poll; the warp agrees on what it saw. An abort in the
            // call before ends the kernel here (every thread of that call passed its end barrier after it).
            const int lane = threadIdx.x;
            uint32_t seq = last;
            int spins = 0;
            uint4 v = make_uint4(0, 0, 0, 0);
            while (!abortedShared) {
                v = make_uint4(0, 0, 0, 0);
                if (lane < BELL_LINES) v = ldVolatile16(bell + lane);
                const uint32_t f = __shfl_sync(0xffffffffu, v.y, 0);
                const bool same = lane >= BELL_LINES || (v.y == f && v.w == f);
                if (__all_sync(0xffffffffu, same) && f != last) {
                    seq = f;
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
            const bool call = seq != last && seq != BELL_STOP_FLAG;  // else idle, aborted or asked to stop
            if (call && lane < BELL_LINES) bellLines[lane] = v;
            __syncwarp();
            threads = call ? residentThreads(bellLines) : 0;
            if (lane == 0) {
                bellNs = globalTimerNs();
                __threadfence_block();  // the lines before the word that announces them
                callWord = ((unsigned long long)(published + 1) << 32) | (uint32_t)threads;
            }
            published++;
            last = call ? seq : last;
        } else {
            // The other warps wait for warp 0's word, sleeping between looks so as not to take issue slots
            // from the warps that poll and push.
            unsigned long long word;
            while ((uint32_t)((word = callWord) >> 32) == published) __nanosleep(32);
            __threadfence_block();
            published = (uint32_t)(word >> 32);
            threads = (int)(uint32_t)word;
        }
        if (threads == 0) break;
        if ((int)threadIdx.x >= threads) continue;  // not needed for this call: wait for the next word
        const CollArgs a = residentArgs(ra.comm, bellLines);
        // No barrier and no abort check here: warp 0's word is the call's start, and oneShotBody checks
        // the abort word with its first reads.
        const uint64_t startNs = globalTimerNs();
        Waiter w = makeWaiter(comm, &abortedShared, a.ticket, startNs);
        OneShotStamps t = {startNs, bellNs, 0, 0, 0};
        const CallNumbers calls = residentOneShot(a, comm, peers, w, t, threads);
        if (threadIdx.x == 0) {
            countOneShotCall(comm, peers.oneShotCalls, calls);  // oneShotBody ended with a barrier: every thread has read the numbers
            // A full system fence before the report, not only the done word's release (as the launched
            // kernels' blocks fence in finish): the one run without it (4 ranks as threads on one H200,
            // in-place calls of 1-5 KB) read old data in the block's last-written lines (those of the
            // threads' second pass) after the done word, most likely because the release orders only what
            // this thread wrote and saw, not the other threads' stores the barrier above ordered before it.
            // The done word is then a plain strong store: fence + store is the release, once.
            __threadfence_system();
            const uint64_t endNs = globalTimerNs();
            // The start time goes to the host with the end, not when the call starts: a store to host
            // memory on the way in sat in front of the push (resident start -> pushed 2.3 us against 1.3 for
            // a launched kernel that writes nothing there).
            *(volatile uint64_t*)(hostStatus + STATUS_WORD_START_NS) = startNs;
            reportDoneFenced(hostStatus, a.ticket, endNs);
            storeProbes(peers, calls, t, endNs);
        }
        if (threadIdx.x == 0) idleSince = globalTimerNs();
    }
    if (threadIdx.x == 0) stReleaseSys((volatile uint64_t*)((const char*)ra.doorbell + BELL_EXIT_BYTE), (uint64_t)last + 1);
}

// ---- The stream-resident one-shot kernel: stream-ordered small all-reduces without a launch. -------
//
// The same one-shot all-reduce as above, taken from the caller's CUDA stream instead of the host
// (StreamResidentKernel.java): for each call the host writes its arguments into a ring slot of mapped
// host memory (four LL lines whose flags are the call's stream number, so a slot being written never
// looks complete), then queues on the caller's stream one write of that number into the doorbell and
// one wait until the done word has reached it (one cuStreamBatchMemOp). The stream's front end rings
// the doorbell only once the work queued before the call is done (the write's memory barrier), and
// holds the work queued after it until the kernel wrote the done word: ordered as a launched kernel,
// for one driver call of ~1 us instead of a launch of ~4 us. Doorbell and done word lie in device
// memory (polled in L2, written by the GPU's front end); the slot is read over PCIe, usually before the
// doorbell rings (the host fills it when it queues the call).
//
// It ends after idleNs without a call, as the blocking one does, but only once every call the host
// queued has run (control word PUBLISHED): a call queued behind a long kernel must find it running. The
// host's check of the exit word and this kernel's decision to end are made safe by both sides writing
// before they read (host: PUBLISHED, then the exit word; kernel: EXITING, then PUBLISHED for a while).
// An abort ends it too; its done word then jumps ahead of every number the host can have queued, so
// the streams' waits pass and the failure surfaces at the host's next call, synchronize or checkErrors.
struct StreamResidentArgs {
    uint64_t comm;     // DevComm* in device memory
    uint64_t ring;     // mapped host memory: STREAM_RING_SLOTS slots of 64 bytes (four LL lines each)
    uint64_t control;  // mapped host memory: the control words below
    uint64_t bell;     // device memory: u32, the stream number of the last call the streams rang
    uint64_t done;     // device memory: u32, the stream number of the last call done
    uint64_t lastSeq;  // the stream number of the last call done before this launch
    uint64_t idleNs;
    uint64_t pad;
};
static_assert(sizeof(StreamResidentArgs) == 64, "StreamResidentArgs layout");
// Control words (byte offsets, StreamResidentKernel.java): PUBLISHED (u64, host): the last stream number
// queued; STOP (u64, host): nonzero asks the kernel to end once idle; EXIT (u64, kernel): state | last
// number done << 32 (state 0 running, 1 deciding to end, 2 ended); CONSUMED (u64, kernel): the last
// number whose slot the kernel has read (the host reuses slots behind it).
enum { STREAM_RING_SLOTS = 1024, CTL_PUBLISHED = 0, CTL_STOP = 8, CTL_EXIT = 64, CTL_CONSUMED = 128 };
enum { EXIT_RUNNING = 0, EXIT_DECIDING = 1, EXIT_ENDED = 2 };
// How long a kernel that decided to end keeps watching PUBLISHED before it does: far longer than the
// host's store, fence and load of the exit word take.
#define STREAM_EXIT_GRACE_NS 20000ull

extern "C" __global__ void __launch_bounds__(SCCL_MAX_THREADS) sccl_stream_resident(StreamResidentArgs ra) {
    __shared__ volatile int abortedShared;
    __shared__ uint4 lines[BELL_LINES];
    __shared__ int ending;
    __shared__ uint64_t bellNs;
    __shared__ OneShotPeers peers;  // read once for the kernel's life (ordered by the first barrier below)
    const DevComm* comm = (const DevComm*)ra.comm;
    volatile char* control = (volatile char*)ra.control;
    volatile uint64_t* published = (volatile uint64_t*)(control + CTL_PUBLISHED);
    volatile uint64_t* exitWord = (volatile uint64_t*)(control + CTL_EXIT);
    volatile uint32_t* bell = (volatile uint32_t*)ra.bell;
    volatile uint32_t* done = (volatile uint32_t*)ra.done;
    volatile int32_t* hostStatus = (volatile int32_t*)comm->hostStatus;
    uint32_t last = (uint32_t)ra.lastSeq;
    uint64_t idleSince = globalTimerNs();
    if (threadIdx.x == 0) abortedShared = 0;
    loadOneShotPeers(comm, peers);
    while (true) {
        if (threadIdx.x < 32) {
            // Warp 0: lanes 0-3 read the next call's slot (until all its flags carry its number), lane 4
            // the doorbell; the call starts when both are there.
            const int lane = threadIdx.x;
            const uint32_t next = last + 1u;
            const uint4* slot = (const uint4*)(ra.ring + (uint64_t)(next % STREAM_RING_SLOTS) * 64);
            bool have = false;
            int spins = 0;
            int end = 0;
            uint4 v = make_uint4(0, 0, 0, 0);
            while (true) {
                if (!have) {
                    if (lane < BELL_LINES) v = ldVolatile16(slot + lane);
                    have = __all_sync(0xffffffffu, lane >= BELL_LINES || (v.y == next && v.w == next));
                }
                const uint32_t rung = __shfl_sync(0xffffffffu, lane == 4 ? ldVolatile32(bell) : 0u, 4);
                if (have && (int32_t)(rung - next) >= 0) break;
                if ((++spins & 255) == 0) {
                    if (lane == 0) {
                        if (hostStatus[0] != 0 || *(volatile uint32_t*)comm->myState != 0) {
                            end = 1;  // aborted: a waiter below would stop at once; end instead
                        } else if ((uint32_t)*published == last && *(volatile uint64_t*)(control + CTL_STOP) != 0) {
                            end = 1;  // the host is closing: it queues nothing more
                        } else if (globalTimerNs() - idleSince > ra.idleNs) {
                            if ((uint32_t)*published != last) {
                                idleSince = globalTimerNs();  // queued behind other work: wait for it
                            } else {
                                // Nothing queued: say so, then watch PUBLISHED for a while before ending.
                                stReleaseSys(exitWord, EXIT_DECIDING | (uint64_t)last << 32);
                                __threadfence_system();
                                const uint64_t t0 = globalTimerNs();
                                bool queued = false;
                                while (globalTimerNs() - t0 < STREAM_EXIT_GRACE_NS) {
                                    if ((uint32_t)*published != last) {
                                        queued = true;
                                        break;
                                    }
                                }
                                if (queued) {
                                    stReleaseSys(exitWord, EXIT_RUNNING);
                                    idleSince = globalTimerNs();
                                } else {
                                    end = 1;
                                }
                            }
                        }
                    }
                    if (__shfl_sync(0xffffffffu, end, 0)) break;
                }
            }
            if (lane == 0) {
                ending = end;
                bellNs = globalTimerNs();
                if (!end) stVolatile64((volatile uint64_t*)(control + CTL_CONSUMED), next);
            }
            if (!end && lane < BELL_LINES) lines[lane] = v;
        }
        __syncthreads();
        if (ending) break;
        const CollArgs a = residentArgs(ra.comm, lines);
        const uint64_t startNs = globalTimerNs();
        Waiter w = makeWaiter(comm, &abortedShared, a.ticket, startNs);
        OneShotStamps t = {startNs, bellNs, 0, 0, 0};
        const CallNumbers calls = residentOneShot(a, comm, peers, w, t, (int)blockDim.x);
        last = last + 1u;
        if (threadIdx.x == 0) {
            countOneShotCall(comm, peers.oneShotCalls, calls);  // oneShotBody ended with a barrier: every thread has read the numbers
            // The block's results before the done word, for the work the stream holds behind it (on this
            // GPU: GPU scope; a fence by this thread after the barrier, as the blocking kernel does).
            __threadfence();
            *done = last;
            storeProbes(peers, calls, t, globalTimerNs());
        }
        idleSince = globalTimerNs();
        if (*w.aborted) break;
    }
    if (threadIdx.x == 0) {
        // After an abort the streams' waits must still pass (their calls fail at the host's next look):
        // the done word jumps far ahead of anything queued. An idle end leaves it where it is.
        const bool aborted = abortedShared != 0 || hostStatus[0] != 0 || *(volatile uint32_t*)comm->myState != 0;
        if (aborted) {
            last = (uint32_t)*published + 0x40000000u;
            __threadfence();
            *done = last;
        }
        __threadfence_system();
        stReleaseSys(exitWord, EXIT_ENDED | (uint64_t)(aborted ? (uint32_t)*published : last) << 32);
    }
}
