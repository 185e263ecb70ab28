// The layouts the host writes and every kernel reads (DevCommLayout.java, GpuOneShotLayout.java,
// GpuLl128Layout.java; DevCommLayoutTest compares the offsets), and the numbers both sides agree on:
// limits, call kinds, ops, status codes and the words of the host status block. The wire formats
// that run through these buffers are in prims_ll.cuh, prims_simple.cuh and prims_ll128.cuh.
//
// Where each buffer lies (ChannelLayout): the receiver's region holds the LL head, Simple head and
// Simple tail on their own cache lines and the slots; the sender reads the heads remotely, only
// when its cached copy says the FIFO could be full.

#pragma once

#include <stdint.h>

#define SCCL_STEPS 8
#define SCCL_MAX_CHANNELS 64
#define SCCL_MAX_THREADS 512
// The most blocks of a one-shot kernel that lets the next kernel on its stream launch early (Params.PDL_MAX_BLOCKS' limit).
#define PDL_MAX_BLOCKS 16
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
    uint32_t calls;            // collectives this rank ran: counted by the kernels here, in DevComm itself, so
                               // that a call's first reads need no pointer read first
    uint32_t pad32;
    uint64_t probe;            // u64[PROBE_SLOTS * PROBE_WORDS] in device memory, or 0 (common.cuh, probes)
    uint64_t oneShotCalls;     // u32[SCCL_MAX_CHANNELS] in device memory: one-shot all-reduces this rank ran, one
                               // copy per block (common.cuh, countOneShotCall)
    uint64_t pad[4];
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
    uint32_t flags;       // ARG_FLAG_*
};
// CollArgs.flags. STREAM: a stream-ordered call (or one replayed from a CUDA graph): nobody on the host
// polls for it, so the kernel writes neither the done word nor its start and end times into mapped
// host memory (each such write, and the system-scope fence that orders it, sits on the kernel's
// critical path); failures are still recorded there.
enum { ARG_FLAG_STREAM = 1 };

static_assert(sizeof(ChannelPtrs) == 128, "ChannelPtrs layout");
static_assert(sizeof(OneShotPtrs) == 128, "OneShotPtrs layout");
static_assert(sizeof(Ll128Ptrs) == 64, "Ll128Ptrs layout");
static_assert(sizeof(Ll128State) == 64, "Ll128State layout");
static_assert(sizeof(DevComm) == 128 + SCCL_MAX_CHANNELS * 128 + 128 + SCCL_MAX_CHANNELS * 64, "DevComm layout");
static_assert(sizeof(CollArgs) == 96, "CollArgs layout");
