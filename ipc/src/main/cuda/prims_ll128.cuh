// LL128 (DESIGN.md, Protocols), one connection per channel (Ll128Link): 128-byte lines of 120 data
// bytes and an 8-byte flag, one whole-line store per line; only where every hop of the ring is NVLink
// or within one GPU. Channel (primitives.cuh) runs its steps through it when the kernel is an LL128 one.

#pragma once

#include "common.cuh"

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
