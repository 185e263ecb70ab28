// Device helpers shared by every protocol and kernel: loads and stores with the orderings the
// protocols need, the reductions (one struct per type and op) and user-buffer access, the wait that
// ends on an abort or a timeout (Waiter), and every kernel's start and end: the abort check, the call
// numbers counted in device memory, and the completion word the host polls. No wire format lives here.

#pragma once

#include <cuda_fp16.h>
#include <cuda_bf16.h>

#include "dev_comm.cuh"

// ---- Memory access with the orderings the protocols need. ----------------------------------------

__device__ __forceinline__ uint64_t ldAcquireSys(const volatile uint64_t* p) {
    uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void stReleaseSys(volatile uint64_t* p, uint64_t v) {
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ uint32_t ldVolatile32(const volatile uint32_t* p) {
    uint32_t v;
    asm volatile("ld.volatile.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ uint64_t ldVolatile64(const volatile uint64_t* p) {
    uint64_t v;
    asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ uint4 ldVolatile16(const void* p) {
    uint4 v;
    asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
    return v;
}

// A FIFO read: not cached in L1 (the slot is rewritten by the peer every STEPS steps), and with no
// compiler memory barrier, so that the loads of one iteration can all be in flight together; the
// ordering against the tail the data was published with comes from __syncthreads.
__device__ __forceinline__ uint4 ldFifo16(const void* p) {
    uint4 v;
    asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}

__device__ __forceinline__ void stVolatile16(void* p, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
    asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(a), "r"(b), "r"(c), "r"(d) : "memory");
}

// A relaxed store at system scope (PTX's st.volatile): what NCCL's LL uses for its head. No fence: the
// loads it answers have returned their values before it is issued (it depends on them).
__device__ __forceinline__ void stVolatile64(volatile uint64_t* p, uint64_t v) {
    asm volatile("st.volatile.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

// Programmatic dependent launch (sm_90): a kernel launched with it (cuLaunchKernelEx, attribute
// PROGRAMMATIC_STREAM_SERIALIZATION) is started while the kernel before it on the stream still runs, once
// that one's blocks have all called launch_dependents (or ended); gridDependencyWait then holds it until
// that kernel has completed and its memory is visible. So the launch latency of the next kernel overlaps
// the end of this one. Both are no-ops for a kernel launched without the attribute.
__device__ __forceinline__ void gridDependencyWait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void gridDependencyLaunchDependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

__device__ __forceinline__ uint64_t globalTimerNs() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// ---- Reductions: one struct per (type, op); S is the storage type of one element. ----------------

template <int OP, typename C>
__device__ __forceinline__ C applyArith(C a, C b) {
    if (OP == OP_SUM || OP == OP_AVG) return a + b;
    if (OP == OP_PROD) return a * b;
    if (OP == OP_MIN) return a < b ? a : b;
    return a > b ? a : b;
}

template <int OP>
struct RedF32 {
    typedef float S;
    __device__ static S apply(S a, S b) { return applyArith<OP>(a, b); }
    __device__ static S post(S a, int n) { return OP == OP_AVG ? a / (float)n : a; }
};

template <int OP>
struct RedF64 {
    typedef double S;
    __device__ static S apply(S a, S b) { return applyArith<OP>(a, b); }
    __device__ static S post(S a, int n) { return OP == OP_AVG ? a / (double)n : a; }
};

// float16 and bfloat16 compute in float and round back at every step (as the CPU engine does).
template <int OP>
struct RedF16 {
    typedef uint16_t S;
    __device__ static float f(S a) { return __half2float(__ushort_as_half(a)); }
    __device__ static S h(float a) { return __half_as_ushort(__float2half_rn(a)); }
    __device__ static S apply(S a, S b) { return h(applyArith<OP>(f(a), f(b))); }
    __device__ static S post(S a, int n) { return OP == OP_AVG ? h(f(a) / (float)n) : a; }
};

template <int OP>
struct RedBF16 {
    typedef uint16_t S;
    __device__ static float f(S a) { return __bfloat162float(__ushort_as_bfloat16(a)); }
    __device__ static S h(float a) { return __bfloat16_as_ushort(__float2bfloat16_rn(a)); }
    __device__ static S apply(S a, S b) { return h(applyArith<OP>(f(a), f(b))); }
    __device__ static S post(S a, int n) { return OP == OP_AVG ? h(f(a) / (float)n) : a; }
};

// Integers wrap around as C's unsigned arithmetic does (signed overflow would be undefined).
template <int OP>
struct RedI32 {
    typedef int32_t S;
    __device__ static S apply(S a, S b) {
        if (OP == OP_SUM || OP == OP_AVG) return (S)((uint32_t)a + (uint32_t)b);
        if (OP == OP_PROD) return (S)((uint32_t)a * (uint32_t)b);
        return applyArith<OP>(a, b);
    }
    __device__ static S post(S a, int n) { return OP == OP_AVG ? a / n : a; }
};

template <int OP>
struct RedI64 {
    typedef int64_t S;
    __device__ static S apply(S a, S b) {
        if (OP == OP_SUM || OP == OP_AVG) return (S)((uint64_t)a + (uint64_t)b);
        if (OP == OP_PROD) return (S)((uint64_t)a * (uint64_t)b);
        return applyArith<OP>(a, b);
    }
    __device__ static S post(S a, int n) { return OP == OP_AVG ? a / (int64_t)n : a; }
};

template <int OP>
struct RedI8 {
    typedef int8_t S;
    __device__ static S apply(S a, S b) { return (S)(uint8_t)applyArith<OP>((int)a, (int)b); }
    __device__ static S post(S a, int n) { return OP == OP_AVG ? (S)(a / n) : a; }
};

template <int OP>
struct RedU8 {
    typedef uint8_t S;
    __device__ static S apply(S a, S b) { return (S)applyArith<OP>((unsigned)a, (unsigned)b); }
    __device__ static S post(S a, int n) { return OP == OP_AVG ? (S)(a / n) : a; }
};

// Elementwise over a pack (8 bytes for LL, 16 for Simple).
template <class R, typename P>
__device__ __forceinline__ P reducePack(P a, P b) {
    typedef typename R::S S;
    constexpr int N = sizeof(P) / sizeof(S);
    union U { P p; S e[N]; };
    U x, y;
    x.p = a;
    y.p = b;
#pragma unroll
    for (int i = 0; i < N; i++) x.e[i] = R::apply(x.e[i], y.e[i]);
    return x.p;
}

template <class R, typename P>
__device__ __forceinline__ P postPack(P a, int n) {
    typedef typename R::S S;
    constexpr int N = sizeof(P) / sizeof(S);
    union U { P p; S e[N]; };
    U x;
    x.p = a;
#pragma unroll
    for (int i = 0; i < N; i++) x.e[i] = R::post(x.e[i], n);
    return x.p;
}

// Up to 8 bytes of user data, element by element where the pack is short or unaligned.
// Loads go through L2 only (ld.global.cg), not L1: the resident kernel outlives the calls, and an L1
// line it kept from an earlier call would hide what a copy or kernel wrote into the user's buffer since.
template <typename S>
__device__ __forceinline__ uint64_t loadUser8(const char* p, int bytes) {
    if (bytes == 8 && ((uintptr_t)p & 7) == 0) return __ldcg((const unsigned long long*)p);
    union { uint64_t u; S e[8 / sizeof(S)]; } x;
    x.u = 0;
    const S* q = (const S*)p;
    for (int i = 0; i < bytes / (int)sizeof(S); i++) x.e[i] = __ldcg(q + i);
    return x.u;
}

template <typename S>
__device__ __forceinline__ void storeUser8(char* p, uint64_t v, int bytes) {
    if (bytes == 8 && ((uintptr_t)p & 7) == 0) {
        *(uint64_t*)p = v;
        return;
    }
    union { uint64_t u; S e[8 / sizeof(S)]; } x;
    x.u = v;
    S* q = (S*)p;
    for (int i = 0; i < bytes / (int)sizeof(S); i++) q[i] = x.e[i];
}

// ---- Waiting: every spin loop ends on success, on an abort raised by anyone, or on timeout. -------

struct Waiter {
    volatile uint32_t* myState;
    volatile uint32_t* nextState;
    volatile int32_t* hostStatus;
    volatile int* aborted;  // shared memory: this block gave up
    uint64_t start;
    uint64_t timeoutNs;
    uint32_t ticket;  // the call's CollArgs.ticket, recorded with the first failure

    // Called once per failed poll; true means stop waiting (the caller carries on without the data).
    __device__ __forceinline__ bool check(int spins) {
        if (*aborted) return true;
        if ((spins & 63) == 0) {
            if (*myState != 0) return raise(STATUS_PEER_ABORT);
            if ((spins & 1023) == 0) {
                if (hostStatus[0] != 0) return raise(STATUS_HOST_ABORT);
                if (timeoutNs != 0 && globalTimerNs() - start > timeoutNs) return raise(STATUS_TIMEOUT);
            }
        }
        return false;
    }

    // Records why (first reason wins), and raises the abort words so that every rank stops.
    __device__ bool raise(int code) {
        *aborted = 1;
        if (hostStatus[1] == 0) {
            hostStatus[1] = code;
            hostStatus[2] = blockIdx.x;
            hostStatus[STATUS_WORD_FAILED_TICKET] = (int32_t)ticket;
        }
        *myState = 1;
        *nextState = 1;
        __threadfence_system();
        return true;
    }
};

// A header exchange that found the peer's call different from this one: both headers go to the host,
// which names them in its error (first failure only), then every rank is stopped.
__device__ __forceinline__ void reportMismatch(Waiter& w, const uint32_t* theirs, const uint32_t* mine) {
    if (w.hostStatus[1] == 0) {
        for (int k = 0; k < 8; k++) {
            w.hostStatus[8 + k] = (int32_t)theirs[k];
            w.hostStatus[16 + k] = (int32_t)mine[k];
        }
        __threadfence_system();
    }
    w.raise(STATUS_MISMATCH);
}

// A sender of a flag-per-line protocol (LL, LL128), before reusing a slot: waits until the receiver has
// consumed the step STEPS ago. One lane per warp polls the (remote) head and shares what it saw.
__device__ __forceinline__ void waitForRoom(const volatile uint64_t* head, uint64_t step, uint64_t& headCache,
                                            Waiter& w) {
    if (step < headCache + SCCL_STEPS) return;
    uint64_t seen = headCache;
    if ((threadIdx.x & 31) == 0) {
        int spins = 0;
        while (true) {
            seen = ldVolatile64(head);
            if (step < seen + SCCL_STEPS) break;
            if (w.check(++spins)) break;
        }
    }
    seen = __shfl_sync(0xffffffffu, seen, 0);
    if (seen > headCache) headCache = seen;
    if (step >= headCache + SCCL_STEPS) headCache = step;  // aborted: stop asking
}

__device__ __forceinline__ int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
__device__ __forceinline__ int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

// ---- Every kernel's start and end. ---------------------------------------------------------------

// The completion report the host polls (every kernel's, launched or resident): the end time, then
// the call's sequence number with a system-scope release. The caller has fenced its block's results.
// The end time, then the done word with a system-scope release (which orders the end time before it:
// no second fence between them). The caller has fenced the block's results at system scope.
__device__ void reportDone(volatile int32_t* hostStatus, uint32_t ticket) {
    *(volatile uint64_t*)(hostStatus + STATUS_WORD_END_NS) = globalTimerNs();
    stReleaseSys((volatile uint64_t*)(hostStatus + STATUS_WORD_DONE_SEQ), (uint64_t)ticket);
}

// The same where the caller has just fenced at system scope after everything the report covers (the
// resident kernel): a fence then a strong store is a release (PTX), so a second fence would be waste.
__device__ void reportDoneFenced(volatile int32_t* hostStatus, uint32_t ticket, uint64_t endNs) {
    *(volatile uint64_t*)(hostStatus + STATUS_WORD_END_NS) = endNs;
    stVolatile64((volatile uint64_t*)(hostStatus + STATUS_WORD_DONE_SEQ), (uint64_t)ticket);
}

// A call's numbers, counted in device memory by the kernels themselves (DevComm.calls and
// DevComm.oneShotCalls), not passed by the host: a kernel replayed from a CUDA graph keeps the CollArgs of
// its capture, but each replay must carry the next sequence number in its header and use the next
// one-shot inbox parity and flag.
struct CallNumbers {
    uint32_t seq;          // the header's sequence number: 1 + the collectives this rank ran before
    uint32_t oneShotCall;  // one-shot all-reduces this rank ran before this one (one-shot kernels only)
};

// A ring kernel's: every block reads the sequence number at its start; the block that ends the call
// counts it (finish), after every block has read.
__device__ __forceinline__ CallNumbers callNumbers(const DevComm* comm) {
    CallNumbers n;
    n.seq = *(const volatile uint32_t*)&comm->calls + 1u;
    n.oneShotCall = 0;
    return n;
}

// A one-shot block's: the sequence number (used by block 0 alone: the header and the probes) and the
// block's own copy of the one-shot count. Each block keeps its own copy (DevComm.oneShotCalls[block]),
// so that no block needs to know when the others have read theirs: a block counts its own call at its
// end, and the next kernel, ordered after this one, reads the new value. A shared count would need the
// last block to finish to count it (a fence and two atomics at the end of every multi-block kernel: 1.2-1.3
// us of a 4.7 us graph replay at 8-32 KB, one H100). Between kernels every copy holds the same number:
// block 0 also counts the copies of the blocks this kernel does not have.
__device__ __forceinline__ CallNumbers oneShotCallNumbers(const DevComm* comm, const uint32_t* oneShotCalls) {
    CallNumbers n;
    n.seq = *(const volatile uint32_t*)&comm->calls + 1u;
    n.oneShotCall = ((const volatile uint32_t*)oneShotCalls)[blockIdx.x];
    return n;
}

// One thread of a one-shot block, once every thread of the block has read the numbers (a barrier).
// Plain stores: nothing reads them before the kernel (or, resident, the call) ends, which orders them.
__device__ __forceinline__ void countOneShotCall(const DevComm* comm, uint32_t* oneShotCalls, const CallNumbers& n) {
    const uint32_t next = n.oneShotCall + 1u;
    if (blockIdx.x != 0) {
        oneShotCalls[blockIdx.x] = next;
        return;
    }
    *(volatile uint32_t*)&comm->calls = n.seq;
    if (gridDim.x == 1) {  // the small kernels and the resident ones: every copy, 16 bytes at a time (16-byte aligned)
        const uint4 all = make_uint4(next, next, next, next);
        for (int q = 0; q < SCCL_MAX_CHANNELS / 4; q++) ((uint4*)oneShotCalls)[q] = all;
    } else {
        oneShotCalls[0] = next;
        for (int b = gridDim.x; b < SCCL_MAX_CHANNELS; b++) oneShotCalls[b] = next;
    }
}

// Whether this block is the last of its kernel to finish (thread 0 of every block). Its results are
// fenced first: to system scope where the last block then tells the host, through mapped host memory,
// that the collective is complete (the host polls that word instead of asking the driver about the
// stream, a JNI call each); to GPU scope, for the count alone, where the stream orders what comes after
// (ARG_FLAG_STREAM). One block is the last with no count: no read of the counter's address on the way out
// of a small kernel.
__device__ __forceinline__ bool lastBlockDone(const DevComm* comm, bool tellsHost) {
    if (tellsHost) {
        __threadfence_system();
    } else if (gridDim.x != 1) {
        __threadfence();
    }
    if (gridDim.x == 1) return true;
    unsigned int* done = (unsigned int*)comm->blocksDone;
    const bool last = atomicAdd(done, 1u) == gridDim.x - 1;
    if (last) atomicExch(done, 0u);  // the next collective's kernel runs after this one, on the same stream
    return last;
}

// A ring kernel's end (thread 0 of every block): the last block to finish counts the call and, for a
// blocking call, reports it done; a stream-ordered one tells nobody.
__device__ void finish(const DevComm* comm, uint32_t ticket, volatile int32_t* hostStatus, uint32_t flags) {
    const bool last = lastBlockDone(comm, (flags & ARG_FLAG_STREAM) == 0);
    if (last) {
        volatile uint32_t* calls = (volatile uint32_t*)&comm->calls;
        *calls = *calls + 1u;
        if ((flags & ARG_FLAG_STREAM) == 0) reportDone(hostStatus, ticket);  // its release orders the count before it
    }
}

// A launched one-shot kernel's end (thread 0 of every block, after the block's barrier): each block
// counts its own copy of the call numbers (no block waits for another). A stream-ordered kernel is then
// done: the stream orders what comes after it, for its results and the counts alike. A blocking one
// fences, and its last block to finish reports it done.
__device__ void finishOneShot(const DevComm* comm, uint32_t* oneShotCalls, const CallNumbers& n, uint32_t ticket,
                              volatile int32_t* hostStatus, uint32_t flags) {
    countOneShotCall(comm, oneShotCalls, n);
    if ((flags & ARG_FLAG_STREAM) != 0) return;
    if (lastBlockDone(comm, true)) reportDone(hostStatus, ticket);
}

// The waiter alone, with no barrier and no abort check: the one-shot paths check the abort word
// themselves, loaded together with the call's other inputs (oneShotBody), and the resident kernel
// clears abortedShared once (an abort ends it).
__device__ __forceinline__ Waiter makeWaiter(const DevComm* comm, volatile int* abortedShared, uint32_t ticket,
                                             uint64_t startNs) {
    Waiter w;
    w.myState = (volatile uint32_t*)comm->myState;
    w.nextState = (volatile uint32_t*)comm->nextState;
    w.hostStatus = (volatile int32_t*)comm->hostStatus;
    w.aborted = (volatile int*)abortedShared;
    w.start = startNs;
    w.timeoutNs = comm->timeoutNs;
    w.ticket = ticket;
    return w;
}

// Block 0 tells the host when a blocking call started (its kernel time, GpuLauncher); a stream-ordered
// call tells nobody (ARG_FLAG_STREAM).
__device__ __forceinline__ void reportStart(const Waiter& w, uint32_t flags) {
    if (blockIdx.x == 0 && threadIdx.x == 0 && (flags & ARG_FLAG_STREAM) == 0) {
        *(volatile uint64_t*)(w.hostStatus + STATUS_WORD_START_NS) = w.start;
    }
}

// Every kernel's start: the waiter its spin loops use, block 0 records the start time, and an abort
// raised by a peer (or by an earlier kernel of this rank) stops this collective before it starts:
// its data could be a failed peer's leftovers. checkAbort false: the caller checks the abort word
// before it uses a peer's data (oneShotBody), so that the check's read overlaps the call's other
// first reads instead of holding the whole block at a barrier.
__device__ Waiter startKernel(const DevComm* comm, volatile int* abortedShared, uint32_t ticket, uint32_t flags = 0,
                              bool checkAbort = true) {
    const uint64_t startNs = globalTimerNs();
    if (threadIdx.x == 0) *abortedShared = 0;
    __syncthreads();
    Waiter w = makeWaiter(comm, abortedShared, ticket, startNs);
    reportStart(w, flags);
    if (checkAbort) {
        if (threadIdx.x == 0 && *w.myState != 0) w.raise(STATUS_PEER_ABORT);
        __syncthreads();
    }
    return w;
}

// ---- Probes (SPARKCCL_PROBE, GpuProbes.java): where the time of a one-shot call goes. -------------
//
// With DevComm.probe set, a one-shot call (launched or resident) records globaltimer stamps, taken into
// registers as it runs and stored at its end, in slot (sequence number % PROBE_SLOTS) of a ring in
// device memory. globaltimer is one clock for the whole GPU, so the ranks that share one can be
// compared stamp by stamp. Off (0), a call pays a few register moves.
enum { PROBE_SLOTS = 256, PROBE_WORDS = 8 };
enum { PROBE_START = 0, PROBE_PUSHED = 1, PROBE_PEER = 2, PROBE_HEADER = 3, PROBE_BODY = 4, PROBE_END = 5, PROBE_BELL = 6,
       PROBE_SEQ = 7 };

__device__ __forceinline__ uint64_t* probeSlot(uint64_t* ring, uint32_t seq) {
    return ring == nullptr ? nullptr : ring + (uint64_t)(seq % PROBE_SLOTS) * PROBE_WORDS;
}

__device__ __forceinline__ uint64_t* probeSlot(const DevComm* comm, uint32_t seq) {
    return probeSlot((uint64_t*)comm->probe, seq);
}
