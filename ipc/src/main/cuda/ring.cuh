// The ring algorithms (ringKernel), written once over Channel's primitives and run by every protocol's
// kernel: all-reduce (reduce-scatter then all-gather), reduce-scatter, all-gather, broadcast (a chain
// from the root) and barrier. RingScheduleModelTest runs the same schedule transcribed to Java: a change
// here belongs there too.

#pragma once

#include "prims_ll.cuh"
#include "prims_simple.cuh"

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
    Waiter w = startKernel(comm, &abortedShared, a.ticket, a.flags);
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
    if (threadIdx.x == 0) finish(comm, a.ticket, w.hostStatus, a.flags);
}
