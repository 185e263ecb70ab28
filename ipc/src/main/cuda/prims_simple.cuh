// Simple (DESIGN.md, Protocols), Channel's Simple steps: a FIFO of STEPS slots; the sender writes a
// slot, then publishes tail = step + 1 with a release store at system scope; the receiver acquires
// tail, consumes, then publishes head.

#pragma once

#include "primitives.cuh"

#define SCCL_UNROLL 4

// One Simple step: thread 0 waits for the slot (tail) and for room (head), all threads move the
// data with 16-byte accesses, then thread 0 publishes tail (after a system fence) and head.
template <template <int> class RED>
__device__ __noinline__ void Channel<RED>::simpleStep(const char* src, char* dst, int64_t nbytes, bool doRecv, bool doSend,
                                                      bool postOp) {
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

template <template <int> class RED>
template <int OP>
__device__ __noinline__ void Channel<RED>::copyReduce(const char* fifo, const char* src, char* dst, char* out,
                                                      int64_t nbytes, bool postOp) {
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
template <template <int> class RED>
template <int OP, int MASK>
__device__ __forceinline__ void Channel<RED>::copyVectors(const char* fifo, const char* src, char* dst, char* out,
                                                         int64_t nvec, bool postOp) {
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
