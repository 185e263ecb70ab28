// sparkccl's GPU ring collectives: one persistent kernel per rank and collective runs the whole
// ring (reduce-scatter then all-gather for AllReduce), one block per channel, polling flags in
// memory that its ring neighbours write: the next rank's receive buffers (device memory mapped
// through CUDA IPC or peer access, or host memory registered with the GPU for the staged path).
//
// The wire formats are those of the CPU engine (org.sparkccl.core.proto):
//  - LL: 8-byte words, 4 bytes of data then a 4-byte flag = (int)(step + 1); a GPU writes 16-byte
//    lines of two words in one vector store and the reader spins until both flags match.
//  - Simple: a FIFO of STEPS slots; the sender writes a slot, then publishes tail = step + 1 with a
//    release store at system scope; the receiver acquires tail, consumes, then publishes head.
//  - Every collective starts, on every channel, with one LL step carrying the 32-byte collective
//    header (sequence, kind, type, op, protocol, root, count): a rank that sees a different call
//    records both in its status block, raises the abort flags and stops instead of hanging.
// Where each buffer lies (ChannelLayout): the receiver's region holds the LL head, Simple head and
// Simple tail on their own cache lines and the slots; the sender reads the heads remotely, only
// when its cached copy says the FIFO could be full.

#include <stdint.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>

#define SCCL_STEPS 8
#define SCCL_MAX_CHANNELS 64
#define SCCL_MAX_THREADS 512
#define SCCL_UNROLL 4
#define SCCL_MAX_ONESHOT_RANKS 8

enum { KIND_ALL_REDUCE = 0, KIND_REDUCE_SCATTER = 1, KIND_ALL_GATHER = 2, KIND_BROADCAST = 3, KIND_BARRIER = 4 };
enum { OP_SUM = 0, OP_PROD = 1, OP_MIN = 2, OP_MAX = 3, OP_AVG = 4 };
// Status block codes (GpuStatus.java).
enum { STATUS_OK = 0, STATUS_MISMATCH = 1, STATUS_PEER_ABORT = 2, STATUS_TIMEOUT = 3, STATUS_HOST_ABORT = 4 };
// Host status block words (int index; DevCommLayout.STATUS_*): the ticket of the call that failed first,
// the finished call's ticket and the kernel's start and end time (globaltimer ns, 64-bit at int 26 and 28).
enum { STATUS_WORD_FAILED_TICKET = 3, STATUS_WORD_DONE_SEQ = 24, STATUS_WORD_START_NS = 26, STATUS_WORD_END_NS = 28 };

// ---- Layouts shared with Java (DevCommLayout.java): every field 8 bytes, little-endian. ----------

// One channel's pointers, as this rank sees them.
struct ChannelPtrs {
    uint64_t recvLl;          // my region: LL slots the previous rank writes
    uint64_t recvSimple;      // my region: Simple slots
    uint64_t recvLlHead;      // my region: LL steps I consumed (the previous rank reads it)
    uint64_t recvSimpleHead;  // my region: Simple steps I consumed
    uint64_t recvSimpleTail;  // my region: Simple steps the previous rank published
    uint64_t sendLl;          // next rank's region, mapped here
    uint64_t sendSimple;
    uint64_t sendLlHead;
    uint64_t sendSimpleHead;
    uint64_t sendSimpleTail;
    uint64_t state;           // my device memory: ChannelState, kept between kernels
    uint64_t ringOrder;       // my device memory: int32[nranks], the rank at each position of this channel's ring
    uint64_t ringPosition;    // where this rank stands in this channel's ring
    uint64_t pad[3];
};

// Per-channel progress that outlives a kernel (private device memory of this rank).
struct ChannelState {
    uint64_t llSend, llRecv, simpleSend, simpleRecv;
    uint64_t llHeadCache, simpleHeadCache;
    uint64_t pad[2];
};

// The one-shot all-reduce inboxes (GpuOneShotLayout.java): every rank's window holds, after its
// channels, 2 x nranks inboxes of LL lines; rank s pushes its input into inbox (parity, s) of every
// peer. All zero when one-shot is off (some pair of GPUs is not peer-to-peer, or it was turned off).
struct OneShotPtrs {
    uint64_t inboxBytes;                  // bytes of one inbox (16-byte LL lines)
    uint64_t peer[SCCL_MAX_ONESHOT_RANKS];  // rank r's inboxes as this GPU addresses them (mine included)
    uint64_t pad[16 - 1 - SCCL_MAX_ONESHOT_RANKS];
};

// One channel's LL128 connection (GpuLl128Layout.java), zero where LL128 is off (some hop of the ring is
// neither NVLink nor one GPU). The receiver's window holds the head and the slots; the sender writes
// the slots, the receiver the head.
struct Ll128Ptrs {
    uint64_t recvSlots;  // my window: STEPS slots of 128-byte lines the previous rank writes
    uint64_t recvHead;   // my window: LL128 steps I consumed (the previous rank reads it)
    uint64_t sendSlots;  // next rank's window, mapped here
    uint64_t sendHead;
    uint64_t state;      // my device memory: Ll128State, kept between kernels
    uint64_t slotBytes;  // wire bytes of one slot, a multiple of 128
    uint64_t pad[2];
};

// Per-channel LL128 progress that outlives a kernel (private device memory of this rank).
struct Ll128State {
    uint64_t send, recv, headCache;
    uint64_t pad[5];
};

struct DevComm {
    uint64_t rank;
    uint64_t nranks;
    uint64_t llSlotBytes;      // wire bytes of one LL slot (16-byte lines)
    uint64_t simpleSlotBytes;
    uint64_t myState;          // u32 abort word of my region (peers raise it)
    uint64_t nextState;        // u32 abort word of the next rank's region
    uint64_t hostStatus;       // int[32] in mapped pinned host memory: [0] host abort request, [1..] status
    uint64_t timeoutNs;
    uint64_t blocksDone;       // u32 in device memory: blocks of the running kernel that finished
    uint64_t calls;            // u32[2] in device memory: collectives this rank ran, one-shot ones among them
    uint64_t pad[6];
    ChannelPtrs ch[SCCL_MAX_CHANNELS];
    OneShotPtrs oneShot;
    Ll128Ptrs ll128[SCCL_MAX_CHANNELS];
};

// The kernel's only parameter, passed by value (CollArgs in DevCommLayout.java).
struct CollArgs {
    uint64_t comm;        // DevComm* in device memory
    uint64_t send;
    uint64_t recv;
    uint64_t count;       // the call's count, as in the header
    uint64_t blockElems;  // elements per rank block (AllReduce: a padded share; RS/AG: the per-rank count)
    uint64_t totalElems;  // elements in the whole buffer that blocks cut
    uint64_t chunkElems;  // elements of each block that one channel carries
    uint64_t sliceElems;  // elements per step
    uint32_t ticket;      // the host's number for this call: reported as done, named in errors (frozen in a graph)
    uint32_t kind, type, op;
    uint32_t proto, root, nchannels;
    uint32_t pad;
};

static_assert(sizeof(ChannelPtrs) == 128, "ChannelPtrs layout");
static_assert(sizeof(OneShotPtrs) == 128, "OneShotPtrs layout");
static_assert(sizeof(Ll128Ptrs) == 64, "Ll128Ptrs layout");
static_assert(sizeof(Ll128State) == 64, "Ll128State layout");
static_assert(sizeof(DevComm) == 128 + SCCL_MAX_CHANNELS * 128 + 128 + SCCL_MAX_CHANNELS * 64, "DevComm layout");
static_assert(sizeof(CollArgs) == 96, "CollArgs layout");

// ---- Memory access with the orderings the protocols need. ----------------------------------------

__device__ __forceinline__ uint64_t ldAcquireSys(const volatile uint64_t* p) {
    uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void stReleaseSys(volatile uint64_t* p, uint64_t v) {
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
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
template <typename S>
__device__ __forceinline__ uint64_t loadUser8(const char* p, int bytes) {
    if (bytes == 8 && ((uintptr_t)p & 7) == 0) return *(const uint64_t*)p;
    union { uint64_t u; S e[8 / sizeof(S)]; } x;
    x.u = 0;
    const S* q = (const S*)p;
    for (int i = 0; i < bytes / (int)sizeof(S); i++) x.e[i] = q[i];
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

// ---- LL128: NCCL's third protocol, for hops over NVLink or within one GPU. -------------------------
//
// A slot is a run of 128-byte lines; each line carries 120 bytes of data and, in its last 8 bytes, a
// 64-bit flag (the step number + 1). Eight consecutive lanes of a warp write one line, 16 bytes each,
// in one warp-wide store instruction: lane 8k+7 stores the line's last 8 data bytes together with the
// flag. NVLink and a GPU's own memory deliver such a 128-byte store at once, so a reader that sees a
// line's flag sees its data (NCCL's prims_ll128.h relies on the same; PCIe and host memory do not, so
// the host never picks LL128 there). The reader's eight lanes of a line load it the same way, the
// flag lane checks the flag, and the warp spins until every flag lane of the warp is satisfied; then
// it loads the lines once more (as NCCL does) and uses that copy. Flags are 64-bit: they never wrap.
// Line L of a step carries the step's bytes [120 L, 120 L + 120); lane j of the line carries bytes
// 16 j .. 16 j + 15 of them (lane 7: 112..119, then the flag).
#define SCCL_LL128_LINE_BYTES 128
#define SCCL_LL128_DATA_BYTES 120
#define SCCL_LL128_UNROLL 4                              // lines per lane and pass: loads in flight
#define SCCL_LL128_WARP_LINES (4 * SCCL_LL128_UNROLL)    // a warp covers 4 lines per store instruction

__device__ __forceinline__ void ldVolatile2x64(const void* p, uint64_t& a, uint64_t& b) {
    asm volatile("ld.volatile.global.v2.u64 {%0,%1}, [%2];" : "=l"(a), "=l"(b) : "l"(p) : "memory");
}

__device__ __forceinline__ void stVolatile2x64(void* p, uint64_t a, uint64_t b) {
    asm volatile("st.volatile.global.v2.u64 [%0], {%1,%2};" ::"l"(p), "l"(a), "l"(b) : "memory");
}

template <template <int> class RED>
struct Ll128Link {
    typedef typename RED<OP_SUM>::S S;
    const char* recvSlots;
    volatile uint64_t* recvHead;
    char* sendSlots;
    const volatile uint64_t* sendHead;
    Ll128State* statePtr;
    uint64_t sendStep, recvStep, headCache;
    int64_t slotBytes;
    int nranks;
    int op;
    Waiter w;

    __device__ void load(const DevComm* c, int channel, int reduceOp, Waiter waiter) {
        const Ll128Ptrs& p = c->ll128[channel];
        recvSlots = (const char*)p.recvSlots;
        recvHead = (volatile uint64_t*)p.recvHead;
        sendSlots = (char*)p.sendSlots;
        sendHead = (const volatile uint64_t*)p.sendHead;
        statePtr = (Ll128State*)p.state;
        slotBytes = (int64_t)p.slotBytes;
        const volatile uint64_t* sv = (const volatile uint64_t*)statePtr;
        sendStep = sv[0];
        recvStep = sv[1];
        headCache = sv[2];
        nranks = (int)c->nranks;
        op = reduceOp;
        w = waiter;
    }

    // Called by every thread after a __syncthreads (Channel::save).
    __device__ void save() {
        if (threadIdx.x == 0) {
            volatile uint64_t* sv = (volatile uint64_t*)statePtr;
            sv[0] = sendStep;
            sv[1] = recvStep;
            sv[2] = headCache;
            __threadfence();
        }
    }

    __device__ __forceinline__ void waitSlot() { waitForRoom(sendHead, sendStep, headCache, w); }

    template <int OP>
    __device__ __noinline__ void lines(const char* rslot, uint64_t rflag, const char* src, char* dst, char* sslot,
                                       uint64_t sflag, int64_t nbytes, int64_t nlines, bool doRecv, bool doSend,
                                       bool postOp) {
        typedef RED<OP> R;
        const int lane = threadIdx.x & 31;
        const int part = lane & 7;        // which 16 bytes of its line this lane carries
        const bool flagLane = part == 7;  // ... the last ones: 8 data bytes and the flag
        const int64_t warpStride = (int64_t)(blockDim.x >> 5) * SCCL_LL128_WARP_LINES;
        for (int64_t base = (int64_t)(threadIdx.x >> 5) * SCCL_LL128_WARP_LINES; base < nlines; base += warpStride) {
            uint64_t lo[SCCL_LL128_UNROLL], hi[SCCL_LL128_UNROLL];
            // The user's data first: its loads are in flight while the lane waits for the peer's lines.
#pragma unroll
            for (int u = 0; u < SCCL_LL128_UNROLL; u++) {
                const int64_t off = (base + 4 * u + (lane >> 3)) * SCCL_LL128_DATA_BYTES + 16 * part;
                const int64_t b0 = min(max(nbytes - off, (int64_t)0), (int64_t)8);
                const int64_t b1 = flagLane ? 0 : min(max(nbytes - off - 8, (int64_t)0), (int64_t)8);
                lo[u] = src != nullptr && b0 > 0 ? loadUser8<S>(src + off, (int)b0) : 0;
                hi[u] = src != nullptr && b1 > 0 ? loadUser8<S>(src + off + 8, (int)b1) : 0;
            }
            if (doRecv) {
                uint64_t rlo[SCCL_LL128_UNROLL], rhi[SCCL_LL128_UNROLL];
                int spins = 0;
                bool again;
                do {
                    again = false;
#pragma unroll
                    for (int u = 0; u < SCCL_LL128_UNROLL; u++) {
                        const int64_t line = base + 4 * u + (lane >> 3);
                        if (line < nlines) {
                            ldVolatile2x64(rslot + line * SCCL_LL128_LINE_BYTES + 16 * part, rlo[u], rhi[u]);
                            again |= flagLane && rhi[u] != rflag;
                        }
                    }
                    if (again && w.check(++spins)) again = false;
                } while (__any_sync(0xffffffffu, again));
#pragma unroll
                for (int u = 0; u < SCCL_LL128_UNROLL; u++) {
                    const int64_t line = base + 4 * u + (lane >> 3);
                    if (line < nlines) ldVolatile2x64(rslot + line * SCCL_LL128_LINE_BYTES + 16 * part, rlo[u], rhi[u]);
                    lo[u] = src != nullptr ? reducePack<R>(rlo[u], lo[u]) : rlo[u];
                    hi[u] = src != nullptr ? reducePack<R>(rhi[u], hi[u]) : rhi[u];
                }
            }
            // After an abort nothing more is sent: a peer must never take garbage for data. The whole warp
            // agrees, so that no line goes out with its flag but without some of its data.
            const bool live = __all_sync(0xffffffffu, !*w.aborted);
#pragma unroll
            for (int u = 0; u < SCCL_LL128_UNROLL; u++) {
                const int64_t line = base + 4 * u + (lane >> 3);
                const int64_t off = line * SCCL_LL128_DATA_BYTES + 16 * part;
                const int64_t b0 = min(max(nbytes - off, (int64_t)0), (int64_t)8);
                const int64_t b1 = flagLane ? 0 : min(max(nbytes - off - 8, (int64_t)0), (int64_t)8);
                if (postOp) {
                    lo[u] = postPack<R>(lo[u], nranks);
                    hi[u] = postPack<R>(hi[u], nranks);
                }
                if (dst != nullptr && b0 > 0) storeUser8<S>(dst + off, lo[u], (int)b0);
                if (dst != nullptr && b1 > 0) storeUser8<S>(dst + off + 8, hi[u], (int)b1);
                if (doSend && live && line < nlines) {
                    stVolatile2x64(sslot + line * SCCL_LL128_LINE_BYTES + 16 * part, lo[u], flagLane ? sflag : hi[u]);
                }
            }
        }
    }

    // One LL128 step, with the LL step's meaning (Channel::llStep). An empty step still carries one line.
    __device__ __noinline__ void step(const char* src, char* dst, int64_t nbytes, bool doRecv, bool doSend, bool postOp) {
        int64_t nlines = (nbytes + SCCL_LL128_DATA_BYTES - 1) / SCCL_LL128_DATA_BYTES;
        if (nlines == 0) nlines = 1;
        const uint64_t sflag = sendStep + 1;
        const uint64_t rflag = recvStep + 1;
        char* sslot = sendSlots + (int64_t)(sendStep % SCCL_STEPS) * slotBytes;
        const char* rslot = recvSlots + (int64_t)(recvStep % SCCL_STEPS) * slotBytes;
        if (doSend) waitSlot();
        switch (op) {
            case OP_SUM: lines<OP_SUM>(rslot, rflag, src, dst, sslot, sflag, nbytes, nlines, doRecv, doSend, postOp); break;
            case OP_PROD: lines<OP_PROD>(rslot, rflag, src, dst, sslot, sflag, nbytes, nlines, doRecv, doSend, postOp); break;
            case OP_MIN: lines<OP_MIN>(rslot, rflag, src, dst, sslot, sflag, nbytes, nlines, doRecv, doSend, postOp); break;
            case OP_MAX: lines<OP_MAX>(rslot, rflag, src, dst, sslot, sflag, nbytes, nlines, doRecv, doSend, postOp); break;
            default: lines<OP_AVG>(rslot, rflag, src, dst, sslot, sflag, nbytes, nlines, doRecv, doSend, postOp); break;
        }
        if (doSend) sendStep++;
        if (doRecv) {
            __syncthreads();  // every warp has read the slot before the sender may reuse it
            if (threadIdx.x == 0) stReleaseSys(recvHead, recvStep + 1);
            recvStep++;
        }
    }
};

// ---- One channel's connection and its two protocols. --------------------------------------------

template <template <int> class RED>
struct Channel {
    typedef typename RED<OP_SUM>::S S;
    const DevComm* comm;
    ChannelState* statePtr;
    uint4* recvLl;
    const char* recvSimple;
    volatile uint64_t* recvLlHead;
    volatile uint64_t* recvSimpleHead;
    const volatile uint64_t* recvSimpleTail;
    uint4* sendLl;
    char* sendSimple;
    const volatile uint64_t* sendLlHead;
    const volatile uint64_t* sendSimpleHead;
    volatile uint64_t* sendSimpleTail;
    uint64_t llSend, llRecv, simpleSend, simpleRecv, llHeadCache, simpleHeadCache;
    int64_t llSlotLines;
    int64_t simpleSlotBytes;
    int nranks;
    int op;
    bool simple;
    Waiter w;
    bool useLl128;  // steps go through ll128 (loadLl128); the header still goes through LL
    Ll128Link<RED> ll128;

    __device__ void load(const DevComm* c, int channel, bool useSimple, int reduceOp, Waiter waiter) {
        comm = c;
        const ChannelPtrs& p = c->ch[channel];
        statePtr = (ChannelState*)p.state;
        recvLl = (uint4*)p.recvLl;
        recvSimple = (const char*)p.recvSimple;
        recvLlHead = (volatile uint64_t*)p.recvLlHead;
        recvSimpleHead = (volatile uint64_t*)p.recvSimpleHead;
        recvSimpleTail = (const volatile uint64_t*)p.recvSimpleTail;
        sendLl = (uint4*)p.sendLl;
        sendSimple = (char*)p.sendSimple;
        sendLlHead = (const volatile uint64_t*)p.sendLlHead;
        sendSimpleHead = (const volatile uint64_t*)p.sendSimpleHead;
        sendSimpleTail = (volatile uint64_t*)p.sendSimpleTail;
        // Volatile: the resident kernel runs while other kernels of this rank update the state, so a
        // copy cached in L1 from its previous call may be stale.
        ChannelState s;
        const volatile uint64_t* sv = (const volatile uint64_t*)statePtr;
        s.llSend = sv[0];
        s.llRecv = sv[1];
        s.simpleSend = sv[2];
        s.simpleRecv = sv[3];
        s.llHeadCache = sv[4];
        s.simpleHeadCache = sv[5];
        llSend = s.llSend;
        llRecv = s.llRecv;
        simpleSend = s.simpleSend;
        simpleRecv = s.simpleRecv;
        llHeadCache = s.llHeadCache;
        simpleHeadCache = s.simpleHeadCache;
        llSlotLines = (int64_t)(c->llSlotBytes / 16);
        simpleSlotBytes = (int64_t)c->simpleSlotBytes;
        nranks = (int)c->nranks;
        simple = useSimple;
        useLl128 = false;
        op = reduceOp;
        w = waiter;
    }

    __device__ void save() {
        __syncthreads();
        if (threadIdx.x == 0) {
            ChannelState s;
            s.llSend = llSend;
            s.llRecv = llRecv;
            s.simpleSend = simpleSend;
            s.simpleRecv = simpleRecv;
            s.llHeadCache = llHeadCache;
            s.simpleHeadCache = simpleHeadCache;
            s.pad[0] = s.pad[1] = 0;
            *statePtr = s;
            __threadfence();
        }
        if (useLl128) ll128.save();
    }

    // LL sender: before reusing a slot, wait until the receiver has consumed the step STEPS ago.
    // One lane per warp polls the (remote) head and shares what it saw.
    __device__ __forceinline__ void llWaitSlot() { waitForRoom(sendLlHead, llSend, llHeadCache, w); }

    __device__ __forceinline__ uint64_t llRead(const uint4* line, uint32_t flag) {
        uint4 v;
        int spins = 0;
        while (true) {
            v = ldVolatile16(line);
            if (v.y == flag && v.w == flag) break;
            if (w.check(++spins)) break;
        }
        return ((uint64_t)v.z << 32) | v.x;
    }

    template <int OP>
    __device__ __noinline__ void llLines(const uint4* rslot, uint32_t rflag, const char* src, char* dst, uint4* sslot,
                                         uint32_t sflag, int64_t nbytes, int64_t nlines, bool doRecv, bool doSend,
                                         bool postOp) {
        typedef RED<OP> R;
        for (int64_t i = threadIdx.x; i < nlines; i += blockDim.x) {
            const int64_t off = i * 8;
            const int bytes = (int)min((int64_t)8, nbytes - off);
            uint64_t v = 0;
            if (doRecv) v = llRead(rslot + i, rflag);
            if (src != nullptr && bytes > 0) {
                uint64_t u = loadUser8<S>(src + off, bytes);
                v = doRecv ? reducePack<R>(v, u) : u;
            }
            if (postOp && bytes > 0) v = postPack<R>(v, nranks);
            if (dst != nullptr && bytes > 0) storeUser8<S>(dst + off, v, bytes);
            // After an abort nothing more is sent: a peer must never take garbage for data.
            if (doSend && !*w.aborted) stVolatile16(sslot + i, (uint32_t)v, sflag, (uint32_t)(v >> 32), sflag);
        }
    }

    // One LL step: optionally receive a slot, combine it with user data, store to the user buffer and
    // send it on. An empty step still carries one line, so that every step is a real wait.
    __device__ __noinline__ void llStep(const char* src, char* dst, int64_t nbytes, bool doRecv, bool doSend, bool postOp) {
        int64_t nlines = (nbytes + 7) / 8;
        if (nlines == 0) nlines = 1;
        const uint32_t sflag = (uint32_t)(llSend + 1);
        const uint32_t rflag = (uint32_t)(llRecv + 1);
        uint4* sslot = sendLl + (int64_t)(llSend % SCCL_STEPS) * llSlotLines;
        const uint4* rslot = recvLl + (int64_t)(llRecv % SCCL_STEPS) * llSlotLines;
        if (doSend) llWaitSlot();
        switch (op) {
            case OP_SUM: llLines<OP_SUM>(rslot, rflag, src, dst, sslot, sflag, nbytes, nlines, doRecv, doSend, postOp); break;
            case OP_PROD: llLines<OP_PROD>(rslot, rflag, src, dst, sslot, sflag, nbytes, nlines, doRecv, doSend, postOp); break;
            case OP_MIN: llLines<OP_MIN>(rslot, rflag, src, dst, sslot, sflag, nbytes, nlines, doRecv, doSend, postOp); break;
            case OP_MAX: llLines<OP_MAX>(rslot, rflag, src, dst, sslot, sflag, nbytes, nlines, doRecv, doSend, postOp); break;
            default: llLines<OP_AVG>(rslot, rflag, src, dst, sslot, sflag, nbytes, nlines, doRecv, doSend, postOp); break;
        }
        if (doSend) llSend++;
        if (doRecv) {
            __syncthreads();
            // Once in 2^31 steps rewrite the whole slot with a recent flag, so that a line left over
            // from 2^32 steps ago can never look current after the 32-bit flag wraps.
            if ((llRecv & 0x7ffffff8ull) == 0x7ffffff8ull) {
                uint4* slot = recvLl + (int64_t)(llRecv % SCCL_STEPS) * llSlotLines;
                for (int64_t i = threadIdx.x; i < llSlotLines; i += blockDim.x) stVolatile16(slot + i, 0, rflag, 0, rflag);
                __threadfence_system();
                __syncthreads();
            }
            if (threadIdx.x == 0) stReleaseSys(recvLlHead, llRecv + 1);
            llRecv++;
        }
    }

    // One Simple step: thread 0 waits for the slot (tail) and for room (head), all threads move the
    // data with 16-byte accesses, then thread 0 publishes tail (after a system fence) and head.
    __device__ __noinline__ void simpleStep(const char* src, char* dst, int64_t nbytes, bool doRecv, bool doSend, bool postOp) {
        if (threadIdx.x == 0) {
            int spins = 0;
            if (doRecv) {
                while (ldAcquireSys(recvSimpleTail) < simpleRecv + 1) {
                    if (w.check(++spins)) break;
                }
            }
            if (doSend && simpleSend >= simpleHeadCache + SCCL_STEPS) {
                while (true) {
                    simpleHeadCache = ldAcquireSys(sendSimpleHead);
                    if (simpleSend < simpleHeadCache + SCCL_STEPS) break;
                    if (w.check(++spins)) {
                        simpleHeadCache = simpleSend;
                        break;
                    }
                }
            }
        }
        __syncthreads();
        // Read after the barrier, so every thread agrees: after an abort nothing more is sent, and nothing
        // is moved at all (the call fails; its output is not kept). Moving on with the send slot taken away
        // once called copyReduce with a pointer mask its vector switch has no case for (a send-only step:
        // source alone), whose default case loaded through the null FIFO pointer: an MMU fault at address 0
        // (Xid 31, FAULT_PDE, VIRT_READ) that ended this process's CUDA context whenever a peer died during
        // a Simple call (issue 15's kill trials: 8 of 8 such kills).
        const bool live = !*w.aborted;
        if (live) {
            const char* rslot = doRecv ? recvSimple + (int64_t)(simpleRecv % SCCL_STEPS) * simpleSlotBytes : nullptr;
            char* sslot = doSend ? sendSimple + (int64_t)(simpleSend % SCCL_STEPS) * simpleSlotBytes : nullptr;
            switch (op) {
                case OP_SUM: copyReduce<OP_SUM>(rslot, src, dst, sslot, nbytes, postOp); break;
                case OP_PROD: copyReduce<OP_PROD>(rslot, src, dst, sslot, nbytes, postOp); break;
                case OP_MIN: copyReduce<OP_MIN>(rslot, src, dst, sslot, nbytes, postOp); break;
                case OP_MAX: copyReduce<OP_MAX>(rslot, src, dst, sslot, nbytes, postOp); break;
                default: copyReduce<OP_AVG>(rslot, src, dst, sslot, nbytes, postOp); break;
            }
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            if (doSend && live) {
                __threadfence_system();
                stReleaseSys(sendSimpleTail, simpleSend + 1);
            }
            if (doRecv) stReleaseSys(recvSimpleHead, simpleRecv + 1);
        }
        if (doSend) simpleSend++;
        if (doRecv) simpleRecv++;
    }

    // out = (fifo op user) for nbytes; stored to the user's dst and/or the next rank's slot. Which of
    // the four pointers take part is a compile-time mask (one loop per primitive, as NCCL's are), so
    // that each loop keeps only what it needs in registers.
    enum { HAS_FIFO = 1, HAS_SRC = 2, HAS_DST = 4, HAS_OUT = 8 };

    template <int OP>
    __device__ __noinline__ void copyReduce(const char* fifo, const char* src, char* dst, char* out, int64_t nbytes,
                                               bool postOp) {
        typedef RED<OP> R;
        const int tid = threadIdx.x;
        const int nt = blockDim.x;
        const bool aligned = (((uintptr_t)src | (uintptr_t)dst) & 15) == 0;
        int64_t nvec = aligned ? nbytes / 16 : 0;
        if (nvec > 0) {
            const int mask = (fifo != nullptr ? HAS_FIFO : 0) | (src != nullptr ? HAS_SRC : 0) |
                             (dst != nullptr ? HAS_DST : 0) | (out != nullptr ? HAS_OUT : 0);
            switch (mask) {
                case HAS_SRC | HAS_OUT: copyVectors<OP, HAS_SRC | HAS_OUT>(fifo, src, dst, out, nvec, postOp); break;
                case HAS_FIFO | HAS_SRC | HAS_OUT: copyVectors<OP, HAS_FIFO | HAS_SRC | HAS_OUT>(fifo, src, dst, out, nvec, postOp); break;
                case HAS_FIFO | HAS_SRC | HAS_DST | HAS_OUT: copyVectors<OP, HAS_FIFO | HAS_SRC | HAS_DST | HAS_OUT>(fifo, src, dst, out, nvec, postOp); break;
                case HAS_FIFO | HAS_SRC | HAS_DST: copyVectors<OP, HAS_FIFO | HAS_SRC | HAS_DST>(fifo, src, dst, out, nvec, postOp); break;
                case HAS_SRC | HAS_DST | HAS_OUT: copyVectors<OP, HAS_SRC | HAS_DST | HAS_OUT>(fifo, src, dst, out, nvec, postOp); break;
                case HAS_FIFO | HAS_DST | HAS_OUT: copyVectors<OP, HAS_FIFO | HAS_DST | HAS_OUT>(fifo, src, dst, out, nvec, postOp); break;
                case HAS_FIFO | HAS_DST: copyVectors<OP, HAS_FIFO | HAS_DST>(fifo, src, dst, out, nvec, postOp); break;
                default: nvec = 0; break;  // no vector loop for this mix: the element loop below, which checks each pointer
            }
        }
        // The rest (a short tail, or everything when the user's buffers are not 16-byte aligned).
        const int64_t done = nvec * 16;
        const int64_t nelem = (nbytes - done) / (int64_t)sizeof(S);
        for (int64_t e = tid; e < nelem; e += nt) {
            const int64_t off = done + e * (int64_t)sizeof(S);
            S v = 0;
            if (fifo != nullptr) v = *(const volatile S*)(fifo + off);
            if (src != nullptr) {
                S x = *(const S*)(src + off);
                v = fifo != nullptr ? R::apply(v, x) : x;
            }
            if (postOp) v = R::post(v, nranks);
            if (dst != nullptr) *(S*)(dst + off) = v;
            if (out != nullptr) *(S*)(out + off) = v;
        }
    }

    // The 16-byte part. All loads of an iteration are issued before any of them is used, so that
    // UNROLL x 2 loads per thread are in flight at once: one block moves data at a useful rate only
    // with many bytes in flight (local HBM, or a peer's memory across NVLink or PCIe, about a
    // microsecond away). Full iterations take the branch-free path; the last, partial one checks
    // every index.
    template <int OP, int MASK>
    __device__ __forceinline__ void copyVectors(const char* fifo, const char* src, char* dst, char* out, int64_t nvec,
                                                bool postOp) {
        typedef RED<OP> R;
        const int nt = blockDim.x;
        const uint4* f4 = (const uint4*)fifo;
        const uint4* s4 = (const uint4*)src;
        uint4* d4 = (uint4*)dst;
        uint4* o4 = (uint4*)out;
        const int64_t stride = (int64_t)nt * SCCL_UNROLL;
        int64_t base = threadIdx.x;
        for (; base + (SCCL_UNROLL - 1) * nt < nvec; base += stride) {
            uint4 v[SCCL_UNROLL];
            uint4 x[SCCL_UNROLL];
#pragma unroll
            for (int u = 0; u < SCCL_UNROLL; u++) {
                if (MASK & HAS_FIFO) v[u] = ldFifo16(f4 + base + u * nt);
                if (MASK & HAS_SRC) x[u] = s4[base + u * nt];
            }
#pragma unroll
            for (int u = 0; u < SCCL_UNROLL; u++) {
                if (MASK & HAS_SRC) v[u] = (MASK & HAS_FIFO) ? reducePack<R>(v[u], x[u]) : x[u];
                if (postOp) v[u] = postPack<R>(v[u], nranks);
                if (MASK & HAS_DST) d4[base + u * nt] = v[u];
                if (MASK & HAS_OUT) o4[base + u * nt] = v[u];
            }
        }
        for (int64_t i = base; i < nvec; i += nt) {
            uint4 v = make_uint4(0, 0, 0, 0);
            if (MASK & HAS_FIFO) v = ldFifo16(f4 + i);
            if (MASK & HAS_SRC) v = (MASK & HAS_FIFO) ? reducePack<R>(v, s4[i]) : s4[i];
            if (postOp) v = postPack<R>(v, nranks);
            if (MASK & HAS_DST) d4[i] = v;
            if (MASK & HAS_OUT) o4[i] = v;
        }
    }

    __device__ void loadLl128(const DevComm* c, int channel) {
        useLl128 = true;
        ll128.load(c, channel, op, w);
    }

    __device__ __forceinline__ void step(const char* src, char* dst, int64_t nbytes, bool doRecv, bool doSend, bool postOp) {
        if (useLl128) {
            ll128.step(src, dst, nbytes, doRecv, doSend, postOp);
        } else if (simple) {
            simpleStep(src, dst, nbytes, doRecv, doSend, postOp);
        } else {
            llStep(src, dst, nbytes, doRecv, doSend, postOp);
        }
    }

    // The primitives the ring algorithms are written in (NCCL's names).
    __device__ void send(const char* src, int64_t n) { step(src, nullptr, n, false, true, false); }
    __device__ void recvReduceSend(const char* src, int64_t n) { step(src, nullptr, n, true, true, false); }
    __device__ void recvReduceCopySend(const char* src, char* dst, int64_t n, bool post) { step(src, dst, n, true, true, post); }
    __device__ void recvReduceCopy(const char* src, char* dst, int64_t n, bool post) { step(src, dst, n, true, false, post); }
    __device__ void copySend(const char* src, char* dst, int64_t n) { step(src, dst, n, false, true, false); }
    __device__ void recvCopySend(char* dst, int64_t n) { step(nullptr, dst, n, true, true, false); }
    __device__ void recv(char* dst, int64_t n) { step(nullptr, dst, n, true, false, false); }

    // The 32-byte header (CollectiveHeader.java) as one LL step of 4 lines, whatever the protocol.
    __device__ void exchangeHeader(const uint32_t* mine, bool doRecv, bool doSend) {
        __shared__ int mismatch;
        __shared__ uint32_t theirs[8];
        if (threadIdx.x == 0) mismatch = 0;
        __syncthreads();
        const uint32_t sflag = (uint32_t)(llSend + 1);
        const uint32_t rflag = (uint32_t)(llRecv + 1);
        if (doSend) llWaitSlot();
        if (threadIdx.x < 4) {
            const int i = threadIdx.x;
            if (doSend && !*w.aborted) {
                uint4* line = sendLl + (int64_t)(llSend % SCCL_STEPS) * llSlotLines + i;
                stVolatile16(line, mine[2 * i], sflag, mine[2 * i + 1], sflag);
            }
            if (doRecv) {
                const uint4* line = recvLl + (int64_t)(llRecv % SCCL_STEPS) * llSlotLines + i;
                uint64_t v = llRead(line, rflag);
                theirs[2 * i] = (uint32_t)v;
                theirs[2 * i + 1] = (uint32_t)(v >> 32);
                if ((uint32_t)v != mine[2 * i] || (uint32_t)(v >> 32) != mine[2 * i + 1]) mismatch = 1;
            }
        }
        if (doSend) llSend++;
        __syncthreads();
        if (doRecv) {
            if (threadIdx.x == 0) {
                if (mismatch && !*w.aborted) {
                    // Both calls go to the host, which names them in its error.
                    if (w.hostStatus[1] == 0) {
                        for (int k = 0; k < 8; k++) {
                            w.hostStatus[8 + k] = (int32_t)theirs[k];
                            w.hostStatus[16 + k] = (int32_t)mine[k];
                        }
                        __threadfence_system();
                    }
                    w.raise(STATUS_MISMATCH);
                }
                stReleaseSys(recvLlHead, llRecv + 1);
            }
            llRecv++;
            __syncthreads();
        }
    }
};

__device__ __forceinline__ int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
__device__ __forceinline__ int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
__device__ __forceinline__ int modRanks(int a, int n) { return ((a % n) + n) % n; }

// Where block j's part of one step lies: [j*B + rel, j*B + rel + len), clipped to block and buffer.
struct Cut {
    int64_t B, total, rel, len, es;
    __device__ int64_t offset(int j) const { return (j * B + rel) * es; }
    __device__ int64_t bytes(int j) const {
        const int64_t s = j * B + rel;
        const int64_t e = min64(min64(s + len, (int64_t)(j + 1) * B), total);
        return max64(0, e - s) * es;
    }
};

// The last block to finish tells the host, through mapped host memory, that this collective is
// complete: the host polls that word instead of asking the driver about the stream (a JNI call each).
// Every block's results are fenced to system scope before it counts itself.
// The completion report the host polls (every kernel's, launched or resident): the end time, then
// the call's sequence number with a system-scope release. The caller has fenced its block's results.
__device__ void reportDone(volatile int32_t* hostStatus, uint32_t ticket) {
    *(volatile uint64_t*)(hostStatus + STATUS_WORD_END_NS) = globalTimerNs();
    __threadfence_system();
    stReleaseSys((volatile uint64_t*)(hostStatus + STATUS_WORD_DONE_SEQ), (uint64_t)ticket);
}

// A call's numbers, counted in device memory by the kernels themselves (DevComm.calls), not passed by
// the host: a kernel replayed from a CUDA graph keeps the CollArgs of its capture, but each replay must
// carry the next sequence number in its header and use the next one-shot inbox parity and flag. Every
// block reads them at its start; the block that ends the call counts it, after every block has read.
struct CallNumbers {
    uint32_t seq;          // the header's sequence number: 1 + the collectives this rank ran before
    uint32_t oneShotCall;  // one-shot all-reduces this rank ran before this one
};

__device__ __forceinline__ CallNumbers callNumbers(const DevComm* comm) {
    const volatile uint32_t* calls = (const volatile uint32_t*)comm->calls;
    CallNumbers n;
    n.seq = calls[0] + 1u;
    n.oneShotCall = calls[1];
    return n;
}

__device__ __forceinline__ void countCall(const DevComm* comm, bool oneShot) {
    volatile uint32_t* calls = (volatile uint32_t*)comm->calls;
    calls[0] = calls[0] + 1u;
    if (oneShot) calls[1] = calls[1] + 1u;
}

__device__ void finish(const DevComm* comm, uint32_t ticket, bool oneShot, volatile int32_t* hostStatus) {
    __threadfence_system();
    unsigned int* done = (unsigned int*)comm->blocksDone;
    if (atomicAdd(done, 1u) == gridDim.x - 1) {
        atomicExch(done, 0u);  // the next collective's kernel runs after this one, on the same stream
        countCall(comm, oneShot);
        reportDone(hostStatus, ticket);  // its system fence orders the counts before the done word
    }
}

// Every kernel's start: the waiter its spin loops use, block 0 records the start time, and an abort
// raised by a peer (or by an earlier kernel of this rank) stops this collective before it starts:
// its data could be a failed peer's leftovers.
__device__ Waiter startKernel(const DevComm* comm, volatile int* abortedShared, uint32_t ticket) {
    if (threadIdx.x == 0) *abortedShared = 0;
    __syncthreads();
    Waiter w;
    w.myState = (volatile uint32_t*)comm->myState;
    w.nextState = (volatile uint32_t*)comm->nextState;
    w.hostStatus = (volatile int32_t*)comm->hostStatus;
    w.aborted = (volatile int*)abortedShared;
    w.start = globalTimerNs();
    w.timeoutNs = comm->timeoutNs;
    w.ticket = ticket;
    if (blockIdx.x == 0 && threadIdx.x == 0) *(volatile uint64_t*)(w.hostStatus + STATUS_WORD_START_NS) = w.start;
    if (threadIdx.x == 0 && *w.myState != 0) w.raise(STATUS_PEER_ABORT);
    __syncthreads();
    return w;
}

template <template <int> class RED, bool SIMPLE, bool LL128 = false>
__device__ void ringKernel(const CollArgs& a) {
    typedef typename RED<OP_SUM>::S S;
    __shared__ volatile int abortedShared;
    const DevComm* comm = (const DevComm*)a.comm;
    const int n = (int)comm->nranks;
    const int c = blockIdx.x;
    // Each channel runs its own ring: r is this rank's position in it, ring[i] the rank at position i.
    // All-reduce chunks go by position; reduce-scatter and all-gather blocks, and the broadcast root,
    // by rank.
    const int r = (int)comm->ch[c].ringPosition;
    const int* ring = (const int*)comm->ch[c].ringOrder;
    const int me = ring[r];
    Waiter w = startKernel(comm, &abortedShared, a.ticket);
    const CallNumbers calls = callNumbers(comm);

    Channel<RED> ch;
    ch.load(comm, c, SIMPLE, (int)a.op, w);
    if (LL128) ch.loadLl128(comm, c);

    const char* send = (const char*)a.send;
    char* recv = (char*)a.recv;
    const int64_t es = sizeof(S);
    const int64_t B = (int64_t)a.blockElems;
    const int64_t Cb = (int64_t)a.chunkElems;
    const int64_t S_ = (int64_t)a.sliceElems;
    const int64_t chBegin = (int64_t)c * Cb;
    const int64_t chLen = max64(0, min64(Cb, B - chBegin));

    // Broadcast is a chain from the root: the rank before the root sends nothing, the root receives nothing.
    int rootPosition = 0;
    while (rootPosition < n - 1 && ring[rootPosition] != (int)a.root) rootPosition++;
    const int fromRoot = modRanks(r - rootPosition, n);
    const bool doRecv = a.kind == KIND_BROADCAST ? fromRoot != 0 : true;
    const bool doSend = a.kind == KIND_BROADCAST ? fromRoot != n - 1 : true;

    const uint32_t header[8] = {calls.seq, a.kind, a.type, a.op, a.proto, a.root, (uint32_t)a.count, (uint32_t)(a.count >> 32)};
    ch.exchangeHeader(header, doRecv, doSend);

    Cut cut;
    cut.B = B;
    cut.total = (int64_t)a.totalElems;
    cut.es = es;
    for (int64_t t = 0; t < chLen; t += S_) {
        cut.rel = chBegin + t;
        cut.len = min64(S_, chLen - t);
        if (a.kind == KIND_ALL_REDUCE || a.kind == KIND_BARRIER) {
            int j = modRanks(r - 1, n);
            ch.send(send + cut.offset(j), cut.bytes(j));
            for (int k = 2; k < n; k++) {
                j = modRanks(r - k, n);
                ch.recvReduceSend(send + cut.offset(j), cut.bytes(j));
            }
            j = r;
            ch.recvReduceCopySend(send + cut.offset(j), recv + cut.offset(j), cut.bytes(j), true);
            for (int k = 1; k < n - 1; k++) {
                j = modRanks(r - k, n);
                ch.recvCopySend(recv + cut.offset(j), cut.bytes(j));
            }
            j = modRanks(r + 1, n);
            ch.recv(recv + cut.offset(j), cut.bytes(j));
        } else if (a.kind == KIND_REDUCE_SCATTER) {
            int j = ring[modRanks(r - 1, n)];
            ch.send(send + cut.offset(j), cut.bytes(j));
            for (int k = 2; k < n; k++) {
                j = ring[modRanks(r - k, n)];
                ch.recvReduceSend(send + cut.offset(j), cut.bytes(j));
            }
            j = me;
            ch.recvReduceCopy(send + cut.offset(j), recv + cut.rel * es, cut.bytes(j), true);
        } else if (a.kind == KIND_ALL_GATHER) {
            ch.copySend(send + cut.rel * es, recv + cut.offset(me), cut.bytes(me));
            for (int k = 1; k < n - 1; k++) {
                const int j = ring[modRanks(r - k, n)];
                ch.recvCopySend(recv + cut.offset(j), cut.bytes(j));
            }
            const int j = ring[modRanks(r + 1, n)];
            ch.recv(recv + cut.offset(j), cut.bytes(j));
        } else {  // KIND_BROADCAST: one block, the whole buffer
            const int64_t off = cut.rel * es;
            const int64_t bytes = cut.bytes(0);
            if (fromRoot == 0) {
                ch.copySend(send + off, recv + off, bytes);
            } else if (fromRoot < n - 1) {
                ch.recvCopySend(recv + off, bytes);
            } else {
                ch.recv(recv + off, bytes);
            }
        }
    }
    ch.save();
    if (threadIdx.x == 0) finish(comm, a.ticket, false, w.hostStatus);
}


// ---- One-shot all-reduce (2 to 8 ranks whose GPUs all reach each other peer-to-peer). -------------
//
// One exchange instead of a ring's 2(n-1) dependent steps: every rank pushes its whole input, as LL
// lines (flag = 2 * oneShotCall + 1), into its own inbox in every peer's window, then waits on the
// lines in its own inboxes - local memory - and reduces all inputs in rank order 0..n-1, so every rank
// computes bitwise the same result. Inboxes alternate between two parities: a rank can be at most one
// one-shot call ahead of any peer (it cannot finish call k+1 without the peer's input of call k+1,
// which the peer pushes only after its call k ended), so an inbox of parity k % 2 is never rewritten
// before its owner has read it. Consumed lines are zeroed (flag 0, never a live flag since live flags
// are odd), so a line can never look current again after the 32-bit flag wraps around.
// The collective header still goes once around the ring on channel 0's LL connection, in parallel
// with the data, so that ranks that disagree about the call (count, type, op) fail instead of hanging.
// Blocks take contiguous runs of lines; within a block threads stride over them, the same lines in
// both phases, so in-place calls are safe (a thread writes only lines it alone has read).

template <class R, typename S>
__device__ __noinline__ void oneShotReduce(const CollArgs& a, const DevComm* comm, Waiter& w, int64_t first,
                                           int64_t end, int64_t nbytes, uint32_t flag, int parity) {
    const int n = (int)comm->nranks;
    const int r = (int)comm->rank;
    const char* send = (const char*)a.send;
    char* recv = (char*)a.recv;
    const int64_t inboxLines = (int64_t)(comm->oneShot.inboxBytes / 16);
    uint4* mine = (uint4*)comm->oneShot.peer[r];
    for (int64_t i = first + threadIdx.x; i < end; i += blockDim.x) {
        const int64_t off = i * 8;
        const int bytes = (int)min((int64_t)8, nbytes - off);
        const uint64_t own = bytes > 0 ? loadUser8<S>(send + off, bytes) : 0;
        uint64_t acc = 0;
        for (int s = 0; s < n; s++) {
            uint64_t v = own;
            if (s != r) {
                uint4* line = mine + (int64_t)(parity * n + s) * inboxLines + i;
                uint4 x;
                int spins = 0;
                while (true) {
                    x = ldVolatile16(line);
                    if (x.y == flag && x.w == flag) break;
                    if (w.check(++spins)) break;
                }
                stVolatile16(line, 0, 0, 0, 0);
                v = ((uint64_t)x.z << 32) | x.x;
            }
            acc = s == 0 ? v : reducePack<R>(acc, v);
        }
        acc = postPack<R>(acc, n);
        if (bytes > 0 && !*w.aborted) storeUser8<S>(recv + off, acc, bytes);
    }
}

// One one-shot all-reduce by this block set (launched: every block of the grid; resident: one block).
template <template <int> class RED>
__device__ void oneShotBody(const CollArgs& a, const DevComm* comm, Waiter& w) {
    typedef typename RED<OP_SUM>::S S;
    const int n = (int)comm->nranks;
    const int r = (int)comm->rank;
    const int64_t nbytes = (int64_t)a.count * (int64_t)sizeof(S);
    const int64_t nlines = max64(1, (nbytes + 7) / 8);  // an empty call still exchanges one line
    const int64_t per = (nlines + gridDim.x - 1) / gridDim.x;
    const int64_t first = min64(nlines, (int64_t)blockIdx.x * per);
    const int64_t end = min64(nlines, first + per);
    const CallNumbers calls = callNumbers(comm);
    const uint32_t flag = 2u * calls.oneShotCall + 1u;
    const int parity = (int)(calls.oneShotCall & 1u);
    const int64_t inboxLines = (int64_t)(comm->oneShot.inboxBytes / 16);
    const char* send = (const char*)a.send;

    // Push: my input into inbox (parity, r) of every peer.
    if (!*w.aborted) {
        for (int64_t i = first + threadIdx.x; i < end; i += blockDim.x) {
            const int64_t off = i * 8;
            const int bytes = (int)min((int64_t)8, nbytes - off);
            const uint64_t v = bytes > 0 ? loadUser8<S>(send + off, bytes) : 0;
            for (int k = 1; k < n; k++) {
                const int d = (r + k) % n;  // peers in a different order on each rank: spreads the links' load
                uint4* line = (uint4*)comm->oneShot.peer[d] + (int64_t)(parity * n + r) * inboxLines + i;
                stVolatile16(line, (uint32_t)v, flag, (uint32_t)(v >> 32), flag);
            }
        }
    }

    // The header around the ring (channel 0's LL connection), while the peers' data is on its way.
    if (blockIdx.x == 0) {
        Channel<RED> ch;
        ch.load(comm, 0, false, (int)a.op, w);
        const uint32_t header[8] = {calls.seq, a.kind, a.type, a.op, a.proto, a.root, (uint32_t)a.count, (uint32_t)(a.count >> 32)};
        ch.exchangeHeader(header, true, true);
        ch.save();
    }

    switch (a.op) {
        case OP_SUM: oneShotReduce<RED<OP_SUM>, S>(a, comm, w, first, end, nbytes, flag, parity); break;
        case OP_PROD: oneShotReduce<RED<OP_PROD>, S>(a, comm, w, first, end, nbytes, flag, parity); break;
        case OP_MIN: oneShotReduce<RED<OP_MIN>, S>(a, comm, w, first, end, nbytes, flag, parity); break;
        case OP_MAX: oneShotReduce<RED<OP_MAX>, S>(a, comm, w, first, end, nbytes, flag, parity); break;
        default: oneShotReduce<RED<OP_AVG>, S>(a, comm, w, first, end, nbytes, flag, parity); break;
    }
    __syncthreads();
}

template <template <int> class RED>
__device__ void oneShotKernel(const CollArgs& a) {
    __shared__ volatile int abortedShared;
    const DevComm* comm = (const DevComm*)a.comm;
    Waiter w = startKernel(comm, &abortedShared, a.ticket);
    oneShotBody<RED>(a, comm, w);
    if (threadIdx.x == 0) finish(comm, a.ticket, true, w.hostStatus);
}

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
