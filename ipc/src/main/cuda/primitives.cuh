// One channel's ring connection (Channel) and the primitives the ring algorithms are written in, as
// NCCL's src/device/primitives.h: send, recvReduceSend, recvReduceCopySend, recvReduceCopy, copySend,
// recvCopySend and recv are each one step of the channel's protocol, chosen when the kernel starts.
// The steps are defined per protocol: prims_ll.cuh (LL, and the collective header, which always goes
// as LL), prims_simple.cuh (Simple), prims_ll128.cuh (LL128, Ll128Link).

#pragma once

#include "prims_ll128.cuh"

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

    // LL (prims_ll.cuh).
    __device__ __forceinline__ void llWaitSlot();
    __device__ __forceinline__ uint64_t llRead(const uint4* line, uint32_t flag);
    template <int OP>
    __device__ __noinline__ void llLines(const uint4* rslot, uint32_t rflag, const char* src, char* dst, uint4* sslot,
                                         uint32_t sflag, int64_t nbytes, int64_t nlines, bool doRecv, bool doSend,
                                         bool postOp);
    __device__ __noinline__ void llStep(const char* src, char* dst, int64_t nbytes, bool doRecv, bool doSend, bool postOp);
    __device__ void exchangeHeader(const uint32_t* mine, bool doRecv, bool doSend);

    // Simple (prims_simple.cuh).
    __device__ __noinline__ void simpleStep(const char* src, char* dst, int64_t nbytes, bool doRecv, bool doSend, bool postOp);
    template <int OP>
    __device__ __noinline__ void copyReduce(const char* fifo, const char* src, char* dst, char* out, int64_t nbytes,
                                            bool postOp);
    template <int OP, int MASK>
    __device__ __forceinline__ void copyVectors(const char* fifo, const char* src, char* dst, char* out, int64_t nvec,
                                                bool postOp);

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
};
