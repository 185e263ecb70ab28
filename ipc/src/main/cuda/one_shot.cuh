// The one-shot all-reduce (oneShotKernel, and oneShotBody for the resident kernel): LL lines pushed
// into per-peer inboxes (OneShotPtrs, GpuOneShotLayout.java) instead of a ring, with the collective
// header still going around the ring as LL.

#pragma once

#include "prims_ll.cuh"

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
                                           int64_t end, int64_t nbytes, uint32_t flag, int parity, int tid, int nthreads) {
    const int n = (int)comm->nranks;
    const int r = (int)comm->rank;
    const char* send = (const char*)a.send;
    char* recv = (char*)a.recv;
    const int64_t inboxLines = (int64_t)(comm->oneShot.inboxBytes / 16);
    uint4* mine = (uint4*)comm->oneShot.peer[r];
    for (int64_t i = first + tid; i < end; i += nthreads) {
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

// The collective header once around channel 0's LL ring, by one warp alone (block 0's last warp) while
// the block's other warps move the data: the same LL step of 4 lines as Channel::exchangeHeader, with
// the same failure report, but with no block-wide barrier, so that its waits (the peer's header, the
// head's system-scope release) overlap the data's instead of coming before them.
__device__ __noinline__ void oneShotHeader(const CollArgs& a, const DevComm* comm, Waiter& w, const CallNumbers& calls) {
    const int lane = threadIdx.x & 31;
    const ChannelPtrs& p = comm->ch[0];
    volatile uint64_t* state = (volatile uint64_t*)p.state;  // ChannelState: llSend, llRecv, .., llHeadCache
    const uint64_t llSend = state[0];
    const uint64_t llRecv = state[1];
    uint64_t headCache = state[4];
    const int64_t slotLines = (int64_t)(comm->llSlotBytes / 16);
    const uint32_t mine[8] = {calls.seq, a.kind, a.type, a.op, a.proto, a.root, (uint32_t)a.count, (uint32_t)(a.count >> 32)};
    waitForRoom((const volatile uint64_t*)p.sendLlHead, llSend, headCache, w);
    const uint32_t sflag = (uint32_t)(llSend + 1);
    const uint32_t rflag = (uint32_t)(llRecv + 1);
    uint32_t t0 = 0, t1 = 0;
    int mismatch = 0;
    if (lane < 4) {
        if (!*w.aborted) {
            uint4* line = (uint4*)p.sendLl + (int64_t)(llSend % SCCL_STEPS) * slotLines + lane;
            stVolatile16(line, mine[2 * lane], sflag, mine[2 * lane + 1], sflag);
        }
        const uint4* line = (const uint4*)p.recvLl + (int64_t)(llRecv % SCCL_STEPS) * slotLines + lane;
        uint4 v;
        int spins = 0;
        while (true) {
            v = ldVolatile16(line);
            if (v.y == rflag && v.w == rflag) break;
            if (w.check(++spins)) break;
        }
        t0 = v.x;
        t1 = v.z;
        mismatch = t0 != mine[2 * lane] || t1 != mine[2 * lane + 1];
    }
    mismatch = __any_sync(0xffffffffu, mismatch);
    uint32_t theirs[8];
#pragma unroll
    for (int k = 0; k < 4; k++) {
        theirs[2 * k] = __shfl_sync(0xffffffffu, t0, k);
        theirs[2 * k + 1] = __shfl_sync(0xffffffffu, t1, k);
    }
    if (lane == 0) {
        if (mismatch && !*w.aborted) reportMismatch(w, theirs, mine);
        stReleaseSys((volatile uint64_t*)p.recvLlHead, llRecv + 1);
        state[0] = llSend + 1;
        state[1] = llRecv + 1;
        state[4] = headCache;
        __threadfence();
    }
    __syncwarp();
}

// One one-shot all-reduce by this block set (launched: every block of the grid; resident: one block).
// Block 0's last warp carries the header (oneShotHeader); the other threads move the data. Returns the
// call's numbers (read once, at the start) for the count that ends the call.
template <template <int> class RED>
__device__ CallNumbers oneShotBody(const CollArgs& a, const DevComm* comm, Waiter& w) {
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
    const int nthreads = blockIdx.x == 0 ? (int)blockDim.x - 32 : (int)blockDim.x;
    const int tid = (int)threadIdx.x;

    if (blockIdx.x == 0 && tid >= nthreads) {
        oneShotHeader(a, comm, w, calls);
    } else {
        // Push: my input into inbox (parity, r) of every peer.
        if (!*w.aborted) {
            for (int64_t i = first + tid; i < end; i += nthreads) {
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
        switch (a.op) {
            case OP_SUM: oneShotReduce<RED<OP_SUM>, S>(a, comm, w, first, end, nbytes, flag, parity, tid, nthreads); break;
            case OP_PROD: oneShotReduce<RED<OP_PROD>, S>(a, comm, w, first, end, nbytes, flag, parity, tid, nthreads); break;
            case OP_MIN: oneShotReduce<RED<OP_MIN>, S>(a, comm, w, first, end, nbytes, flag, parity, tid, nthreads); break;
            case OP_MAX: oneShotReduce<RED<OP_MAX>, S>(a, comm, w, first, end, nbytes, flag, parity, tid, nthreads); break;
            default: oneShotReduce<RED<OP_AVG>, S>(a, comm, w, first, end, nbytes, flag, parity, tid, nthreads); break;
        }
    }
    __syncthreads();
    return calls;
}

template <template <int> class RED>
__device__ void oneShotKernel(const CollArgs& a) {
    __shared__ volatile int abortedShared;
    const DevComm* comm = (const DevComm*)a.comm;
    Waiter w = startKernel(comm, &abortedShared, a.ticket, a.flags);
    const CallNumbers calls = oneShotBody<RED>(a, comm, w);
    if (threadIdx.x == 0) finish(comm, a.ticket, true, w.hostStatus, a.flags, &calls);
}
