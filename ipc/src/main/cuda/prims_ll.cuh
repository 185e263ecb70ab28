// LL (DESIGN.md, Protocols), Channel's LL steps: 8-byte words, 4 bytes of data then a 4-byte flag =
// (int)(step + 1); a GPU writes 16-byte lines of two words in one vector store and the reader spins
// until both flags match. Every collective starts, on every channel and whatever the protocol, with one
// LL step carrying the 32-byte collective header (sequence, kind, type, op, protocol, root, count): a
// rank that sees a different call records both in its status block, raises the abort flags and stops
// instead of hanging (exchangeHeader).

#pragma once

#include "primitives.cuh"

// LL sender: before reusing a slot, wait until the receiver has consumed the step STEPS ago.
// One lane per warp polls the (remote) head and shares what it saw.
template <template <int> class RED>
__device__ __forceinline__ void Channel<RED>::llWaitSlot() { waitForRoom(sendLlHead, llSend, llHeadCache, w); }

template <template <int> class RED>
__device__ __forceinline__ uint64_t Channel<RED>::llRead(const uint4* line, uint32_t flag) {
    uint4 v;
    int spins = 0;
    while (true) {
        v = ldVolatile16(line);
        if (v.y == flag && v.w == flag) break;
        if (w.check(++spins)) break;
    }
    return ((uint64_t)v.z << 32) | v.x;
}

template <template <int> class RED>
template <int OP>
__device__ __noinline__ void Channel<RED>::llLines(const uint4* rslot, uint32_t rflag, const char* src, char* dst,
                                                   uint4* sslot, uint32_t sflag, int64_t nbytes, int64_t nlines,
                                                   bool doRecv, bool doSend, bool postOp) {
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
template <template <int> class RED>
__device__ __noinline__ void Channel<RED>::llStep(const char* src, char* dst, int64_t nbytes, bool doRecv, bool doSend,
                                                  bool postOp) {
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

// The 32-byte header (CollectiveHeader.java) as one LL step of 4 lines, whatever the protocol.
template <template <int> class RED>
__device__ void Channel<RED>::exchangeHeader(const uint32_t* mine, bool doRecv, bool doSend) {
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
            if (mismatch && !*w.aborted) reportMismatch(w, (const uint32_t*)theirs, mine);
            stReleaseSys(recvLlHead, llRecv + 1);
        }
        llRecv++;
        __syncthreads();
    }
}
