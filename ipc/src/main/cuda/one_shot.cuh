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
    Waiter w = startKernel(comm, &abortedShared, a.ticket, a.flags);
    oneShotBody<RED>(a, comm, w);
    if (threadIdx.x == 0) finish(comm, a.ticket, true, w.hostStatus, a.flags);
}
