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

// What thread 0 of block 0 saw of one call, for the probes (common.cuh); the header warp stamps its own.
struct OneShotStamps {
    uint64_t start, bell, pushed, peer, body;
};

// What a one-shot call needs of DevComm that never changes while the communicator lives, copied into
// the block's shared memory: a launched kernel reads it before it waits for the kernel before it
// (programmatic dependent launch), the resident kernel once for its whole life, so that a call's first
// reads are only those that depend on the call (its numbers, its input). From global memory the inbox
// pointer was a second read after rank and nranks (its index depends on them), on the push's path.
struct OneShotPeers {
    int n;
    int r;
    int64_t inboxLines;
    uint4* inbox[SCCL_MAX_ONESHOT_RANKS];  // rank d's inboxes as this GPU addresses them (mine included)
    uint64_t* probe;                       // DevComm.probe: read at the call's end, where a kernel would wait for it
    uint32_t* oneShotCalls;                // DevComm.oneShotCalls: each block's copy of the one-shot count
};

// Every thread calls it; a barrier must come between it and the first use.
__device__ __forceinline__ void loadOneShotPeers(const DevComm* comm, OneShotPeers& p) {
    const int t = (int)threadIdx.x;
    if (t < SCCL_MAX_ONESHOT_RANKS) p.inbox[t] = (uint4*)comm->oneShot.peer[t];
    if (t == 0) {
        p.n = (int)comm->nranks;
        p.r = (int)comm->rank;
        p.inboxLines = (int64_t)(comm->oneShot.inboxBytes / 16);
        p.probe = (uint64_t*)comm->probe;
        p.oneShotCalls = (uint32_t*)comm->oneShotCalls;
    }
}

// Waits for this block's lines in my inboxes, reduces every rank's input in rank order and stores the
// result. A thread takes its lines U at a time: their inputs and each peer's lines are read together
// (each read is an L2 round trip; one line after the other, a thread's second line added 0.7 us to an
// 8 KB call, block 0's header warp leaving its 480 threads 512 lines). Each line read is zeroed (flag 0,
// never live) once taken.
template <class R, typename S, int U>
__device__ __forceinline__ void oneShotReduceLines(const CollArgs& a, const OneShotPeers& p, Waiter& w, int64_t first,
                                                   int64_t end, int64_t nbytes, uint32_t flag, int parity, int tid,
                                                   int nthreads, OneShotStamps& t) {
    const int n = p.n;
    const int r = p.r;
    const char* send = (const char*)a.send;
    char* recv = (char*)a.recv;
    const int64_t inboxLines = p.inboxLines;
    uint4* mine = p.inbox[r];
    for (int64_t i = first + tid; i < end; i += U * (int64_t)nthreads) {
        int bytes[U];
        uint64_t own[U];
        uint64_t acc[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int64_t j = i + u * (int64_t)nthreads;
            bytes[u] = j < end ? (int)min((int64_t)8, nbytes - j * 8) : -1;  // -1: no line; 0: a line, no data
            own[u] = bytes[u] > 0 ? loadUser8<S>(send + j * 8, bytes[u]) : 0;
            acc[u] = 0;
        }
        for (int s = 0; s < n; s++) {
            uint64_t v[U];
            if (s == r) {
#pragma unroll
                for (int u = 0; u < U; u++) v[u] = own[u];
            } else {
                uint4* lines = mine + (int64_t)(parity * n + s) * inboxLines + i;
                uint4 x[U] = {};
                bool got[U];
#pragma unroll
                for (int u = 0; u < U; u++) got[u] = bytes[u] < 0;
                int spins = 0;
                while (true) {
#pragma unroll
                    for (int u = 0; u < U; u++) {
                        if (!got[u]) x[u] = ldVolatile16(lines + u * (int64_t)nthreads);
                    }
                    bool all = true;
#pragma unroll
                    for (int u = 0; u < U; u++) {
                        if (!got[u]) got[u] = x[u].y == flag && x[u].w == flag;
                        all = all && got[u];
                    }
                    if (all || w.check(++spins)) break;
                }
#pragma unroll
                for (int u = 0; u < U; u++) {
                    if (bytes[u] >= 0) stVolatile16(lines + u * (int64_t)nthreads, 0, 0, 0, 0);
                    v[u] = ((uint64_t)x[u].z << 32) | x[u].x;
                }
            }
#pragma unroll
            for (int u = 0; u < U; u++) acc[u] = s == 0 ? v[u] : reducePack<R>(acc[u], v[u]);
        }
        if (i == first + tid && tid == 0) t.peer = globalTimerNs();
#pragma unroll
        for (int u = 0; u < U; u++) {
            if (bytes[u] > 0 && !*w.aborted) storeUser8<S>(recv + (i + u * (int64_t)nthreads) * 8, postPack<R>(acc[u], n), bytes[u]);
        }
    }
}

// Lines 4 at a time where a thread has more than one, else one. With the 4-wide code on every thread,
// one-block calls were 0.3-0.45 us slower in a CUDA graph (8 B-2 KB, one H100, same run; the probes put it
// in the body, not the end); that this is the cause is a guess not yet measured.
template <class R, typename S>
__device__ __noinline__ void oneShotReduce(const CollArgs& a, const OneShotPeers& p, Waiter& w, int64_t first,
                                           int64_t end, int64_t nbytes, uint32_t flag, int parity, int tid, int nthreads,
                                           OneShotStamps& t) {
    if (end - first <= nthreads) {
        oneShotReduceLines<R, S, 1>(a, p, w, first, end, nbytes, flag, parity, tid, nthreads, t);
    } else {
        oneShotReduceLines<R, S, 4>(a, p, w, first, end, nbytes, flag, parity, tid, nthreads, t);
    }
}

// The collective header once around channel 0's LL ring, by one warp alone (block 0's last warp) while
// the block's other warps move the data: the same LL step of 4 lines as Channel::exchangeHeader, with
// the same failure report, but with no block-wide barrier, so that its waits overlap the data's. The
// head it gives back is a relaxed store (NCCL's LL does the same): the sender waits for it only when
// its FIFO of STEPS slots is full, and the reads it answers are done. No fence after the channel
// state either: the next kernel on the stream, or the resident kernel's next call (this same lane),
// reads it, and a launched kernel on another stream only after the host saw this call's report.
__device__ __noinline__ void oneShotHeader(const CollArgs& a, const DevComm* comm, Waiter& w, const CallNumbers& calls) {
    const int lane = threadIdx.x & 31;
    const ChannelPtrs& p = comm->ch[0];
    volatile uint64_t* state = (volatile uint64_t*)p.state;  // ChannelState: llSend, llRecv, .., llHeadCache
    uint4* sendLl = (uint4*)p.sendLl;
    const uint4* recvLl = (const uint4*)p.recvLl;
    volatile uint64_t* recvLlHead = (volatile uint64_t*)p.recvLlHead;
    const int64_t slotLines = (int64_t)(comm->llSlotBytes / 16);
    uint64_t* probes = probeSlot(comm, calls.seq);
    const uint64_t llSend = state[0];
    const uint64_t llRecv = state[1];
    uint64_t headCache = state[4];
    const uint32_t mine[8] = {calls.seq, a.kind, a.type, a.op, a.proto, a.root, (uint32_t)a.count, (uint32_t)(a.count >> 32)};
    waitForRoom((const volatile uint64_t*)p.sendLlHead, llSend, headCache, w);
    const uint32_t sflag = (uint32_t)(llSend + 1);
    const uint32_t rflag = (uint32_t)(llRecv + 1);
    uint32_t t0 = 0, t1 = 0;
    int mismatch = 0;
    if (lane < 4) {
        if (!*w.aborted) {
            uint4* line = sendLl + (int64_t)(llSend % SCCL_STEPS) * slotLines + lane;
            stVolatile16(line, mine[2 * lane], sflag, mine[2 * lane + 1], sflag);
        }
        const uint4* line = recvLl + (int64_t)(llRecv % SCCL_STEPS) * slotLines + lane;
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
        stVolatile64(recvLlHead, llRecv + 1);
        state[0] = llSend + 1;
        state[1] = llRecv + 1;
        state[4] = headCache;
        if (probes != nullptr) probes[PROBE_HEADER] = globalTimerNs();
    }
    __syncwarp();
}

// A barrier over the block's first `threads` threads (whole warps): the whole block where they are all
// of it (barrier 0, __syncthreads), else named barrier 1, which the resident kernel's threads that sit a
// small call out never reach.
__device__ __forceinline__ void syncThreads(int threads) {
    if (threads == (int)blockDim.x) {
        __syncthreads();
    } else {
        asm volatile("bar.sync 1, %0;" ::"r"(threads) : "memory");
    }
}

// One one-shot all-reduce by this block set (launched: every block of the grid; resident: one block, of
// which the call's first `threads` threads take part).
// Block 0's last warp carries the header (oneShotHeader); the other threads move the data. Every read
// the push depends on - the call's numbers (flag and parity), the abort word, the peers' inboxes and
// the first input line - is issued before any of them is used: chained, these round trips to L2 were
// most of a small call. The abort word is checked before this rank reads any peer's input (a peer's
// abort stops the call before it uses what may be a failed peer's leftovers; startKernel's check with
// its barrier is skipped for this). Returns the call's numbers (read once, at the start) for the count
// that ends the call.
template <template <int> class RED>
__device__ CallNumbers oneShotBody(const CollArgs& a, const DevComm* comm, const OneShotPeers& p, Waiter& w,
                                   OneShotStamps& t, int threads) {
    typedef typename RED<OP_SUM>::S S;
    const int n = p.n;
    const int r = p.r;
    const int64_t nbytes = (int64_t)a.count * (int64_t)sizeof(S);
    const int64_t nlines = max64(1, (nbytes + 7) / 8);  // an empty call still exchanges one line
    const int64_t per = (nlines + gridDim.x - 1) / gridDim.x;
    const int64_t first = min64(nlines, (int64_t)blockIdx.x * per);
    const int64_t end = min64(nlines, first + per);
    const int64_t inboxLines = p.inboxLines;
    const char* send = (const char*)a.send;
    const int nthreads = blockIdx.x == 0 ? threads - 32 : threads;
    const int tid = (int)threadIdx.x;
    const bool header = blockIdx.x == 0 && tid >= nthreads;
    // The first line's input, before the volatile reads below (the compiler keeps memory accesses in
    // order around them; the GPU then has all of them in flight at once).
    const int64_t i0 = first + tid;
    const int bytes0 = header || i0 >= end ? 0 : (int)min((int64_t)8, nbytes - i0 * 8);
    const uint64_t own0 = bytes0 > 0 ? loadUser8<S>(send + i0 * 8, bytes0) : 0;
    const CallNumbers calls = oneShotCallNumbers(comm, p.oneShotCalls);
    const uint32_t abortedBefore = *w.myState;
    const uint32_t flag = 2u * calls.oneShotCall + 1u;
    const int parity = (int)(calls.oneShotCall & 1u);

    if (header) {
        oneShotHeader(a, comm, w, calls);
    } else {
        // Push: my input into inbox (parity, r) of every peer. A thread's lines are read 4 at a time
        // before any is pushed: each read is an L2 round trip, and a store's memory clobber would
        // otherwise hold the next line's read until the line before it has gone out.
        if (!*w.aborted) {
            for (int64_t i = i0; i < end; i += 4 * (int64_t)nthreads) {
                uint64_t v[4];
#pragma unroll
                for (int u = 0; u < 4; u++) {
                    const int64_t j = i + u * (int64_t)nthreads;
                    const int bytes = j < end ? (int)min((int64_t)8, nbytes - j * 8) : 0;
                    v[u] = j == i0 ? own0 : bytes > 0 ? loadUser8<S>(send + j * 8, bytes) : 0;
                }
#pragma unroll
                for (int u = 0; u < 4; u++) {
                    const int64_t j = i + u * (int64_t)nthreads;
                    if (j >= end) break;
                    for (int k = 1; k < n; k++) {
                        const int d = (r + k) % n;  // peers in a different order on each rank: spreads the links' load
                        uint4* line = p.inbox[d] + (int64_t)(parity * n + r) * inboxLines + j;
                        stVolatile16(line, (uint32_t)v[u], flag, (uint32_t)(v[u] >> 32), flag);
                    }
                }
            }
        }
        if (tid == 0) t.pushed = globalTimerNs();
        // The abort word, read with the numbers above, is looked at only now: the push into an aborted
        // peer's inbox harms nobody, and waiting for that read before the push would delay every call.
        if (abortedBefore != 0) w.raise(STATUS_PEER_ABORT);
        switch (a.op) {
            case OP_SUM: oneShotReduce<RED<OP_SUM>, S>(a, p, w, first, end, nbytes, flag, parity, tid, nthreads, t); break;
            case OP_PROD: oneShotReduce<RED<OP_PROD>, S>(a, p, w, first, end, nbytes, flag, parity, tid, nthreads, t); break;
            case OP_MIN: oneShotReduce<RED<OP_MIN>, S>(a, p, w, first, end, nbytes, flag, parity, tid, nthreads, t); break;
            case OP_MAX: oneShotReduce<RED<OP_MAX>, S>(a, p, w, first, end, nbytes, flag, parity, tid, nthreads, t); break;
            default: oneShotReduce<RED<OP_AVG>, S>(a, p, w, first, end, nbytes, flag, parity, tid, nthreads, t); break;
        }
    }
    syncThreads(threads);
    if (tid == 0) t.body = globalTimerNs();
    return calls;
}

// Thread 0 of block 0, after the call's end: its stamps into the probe ring (when probes are on).
__device__ __forceinline__ void storeProbes(const OneShotPeers& p, const CallNumbers& calls, const OneShotStamps& t,
                                            uint64_t endNs) {
    uint64_t* slot = probeSlot(p.probe, calls.seq);
    if (slot == nullptr) return;
    slot[PROBE_START] = t.start;
    slot[PROBE_BELL] = t.bell;
    slot[PROBE_PUSHED] = t.pushed;
    slot[PROBE_PEER] = t.peer;
    slot[PROBE_BODY] = t.body;
    slot[PROBE_END] = endNs;
    slot[PROBE_SEQ] = calls.seq;
}

template <template <int> class RED>
__device__ void oneShotKernel(const CollArgs& a) {
    __shared__ volatile int abortedShared;
    __shared__ OneShotPeers peers;
    const DevComm* comm = (const DevComm*)a.comm;
    // Launched with programmatic dependent launch (GpuLauncher), this kernel may start while the kernel
    // before it on the stream still runs. What never changes is read first, then it waits until that
    // kernel has ended and its writes are visible (a no-op when launched without it), then lets the next
    // one start its own launch. Only a small kernel does: a waiting kernel holds its blocks on the GPU, and
    // where ranks share a GPU those must leave room for the peer's blocks this one waits for (GpuLauncher
    // launches only one-shot kernels of at most PDL_MAX_BLOCKS this way; a larger one lets them start at
    // its end).
    loadOneShotPeers(comm, peers);
    // Its barrier orders peers; the start is reported after the wait, not by it (hence ARG_FLAG_STREAM).
    Waiter w = startKernel(comm, &abortedShared, a.ticket, a.flags | ARG_FLAG_STREAM, false);
    gridDependencyWait();
    if (gridDim.x <= PDL_MAX_BLOCKS) gridDependencyLaunchDependents();
    w.start = globalTimerNs();
    reportStart(w, a.flags);
    OneShotStamps t = {w.start, 0, 0, 0, 0};
    const CallNumbers calls = oneShotBody<RED>(a, comm, peers, w, t, (int)blockDim.x);
    if (threadIdx.x == 0) {
        finishOneShot(comm, peers.oneShotCalls, calls, a.ticket, w.hostStatus, a.flags);
        if (blockIdx.x == 0) storeProbes(peers, calls, t, globalTimerNs());
    }
}
