package org.sparkccl.ipc.gpu;

import org.sparkccl.core.proto.SegmentLayout;

/**
 * Byte layouts shared with the kernels (dev_comm.cuh: DevComm, ChannelPtrs, ChannelState,
 * CollArgs). Every field is 8 bytes unless said otherwise, little-endian as the GPU reads it.
 *
 * <pre>
 *  DevComm (device memory, written once at connect)
 *    0 rank   8 nranks   16 LL slot bytes   24 Simple slot bytes
 *   32 my abort word (u32*)   40 next rank's abort word   48 host status block (int[32], mapped)
 *   56 timeout in ns          64 blocks-done counter (u32*, device memory)
 *   72 call counters (u32[2]*, device memory: collectives run, one-shot all-reduces among them)   80..127 unused
 *  128 + 128 * c: channel c
 *    0 recv LL slots   8 recv Simple slots   16 recv LL head   24 recv Simple head   32 recv Simple tail
 *   40 send LL slots  48 send Simple slots   56 send LL head   64 send Simple head   72 send Simple tail
 *   80 ChannelState*  88 this channel's ring (int32[nranks] in device memory: ring[i] is the rank at
 *   position i)   96 this rank's position in it   104..127 unused
 *  128 + 128 * 64: one-shot inboxes (GpuOneShotLayout)
 *    0 inbox bytes   8 + 8 * r: rank r's inboxes as this GPU addresses them (0 when one-shot is off)
 *  128 + 128 * 64 + 128 + 64 * c: channel c's LL128 connection (GpuLl128Layout; 0 when LL128 is off)
 *    0 recv slots   8 recv head   16 send slots   24 send head   32 Ll128State*   40 slot bytes   48..63 unused
 *  ChannelState (64 bytes per channel, private device memory): LL send/recv step, Simple send/recv
 *  step, LL and Simple head caches
 *  Ll128State (64 bytes per channel, private device memory): LL128 send and recv step, head cache
 *  CollArgs (96 bytes, the kernel's parameter): see ARG_* offsets
 * </pre>
 */
final class DevCommLayout {
    static final int MAX_CHANNELS = 64;
    static final int HEADER_BYTES = 128;
    static final int CHANNEL_BYTES = 128;
    /** After the channels: the one-shot inboxes (0 inbox bytes, then one pointer per rank, mine included). */
    static final int ONE_SHOT = HEADER_BYTES + MAX_CHANNELS * CHANNEL_BYTES;
    static final int ONE_SHOT_INBOX_BYTES = ONE_SHOT;
    static final int ONE_SHOT_PEER = ONE_SHOT + 8;
    static final int ONE_SHOT_BYTES = 128;
    /** After the one-shot inboxes: one LL128 connection per channel. */
    static final int LL128 = ONE_SHOT + ONE_SHOT_BYTES;
    static final int LL128_CHANNEL_BYTES = 64;
    static final int LL128_RECV_SLOTS = 0;
    static final int LL128_RECV_HEAD = 8;
    static final int LL128_SEND_SLOTS = 16;
    static final int LL128_SEND_HEAD = 24;
    static final int LL128_STATE = 32;
    static final int LL128_SLOT_BYTES = 40;
    static final int BYTES = LL128 + MAX_CHANNELS * LL128_CHANNEL_BYTES;
    static final int STATE_BYTES = 64;

    // The per-connection state buffer in device memory (GpuConnection's channelState), zero at connect:
    // each channel's state (STATE_BYTES), then the kernels' blocks-done counter on a 64-byte line of its
    // own (DevComm.blocksDone), then each one-shot block's call count (u32, DevComm.oneShotCalls).
    static final long STATES_BLOCKS_DONE = (long) STATE_BYTES * MAX_CHANNELS;
    static final long STATES_ONE_SHOT_CALLS = STATES_BLOCKS_DONE + 64;
    static final long STATES_BYTES = STATES_ONE_SHOT_CALLS + 4L * MAX_CHANNELS;

    static final int RANK = 0;
    static final int NRANKS = 8;
    static final int LL_SLOT_BYTES = 16;
    static final int SIMPLE_SLOT_BYTES = 24;
    static final int MY_STATE = 32;
    static final int NEXT_STATE = 40;
    static final int HOST_STATUS = 48;
    static final int TIMEOUT_NS = 56;
    static final int BLOCKS_DONE = 64;
    /** u32, the collectives this rank ran, counted by the kernels (DevComm.calls): in DevComm itself, zero at connect. */
    static final int CALLS = 72;
    static final int PROBE = 80;
    /** Pointer to u32[MAX_CHANNELS] in device memory, each one-shot block's copy of the one-shot count (zero at connect). */
    static final int ONE_SHOT_CALLS = 88;

    static final int RECV_LL = 0;
    static final int RECV_SIMPLE = 8;
    static final int RECV_LL_HEAD = 16;
    static final int RECV_SIMPLE_HEAD = 24;
    static final int RECV_SIMPLE_TAIL = 32;
    static final int SEND_LL = 40;
    static final int SEND_SIMPLE = 48;
    static final int SEND_LL_HEAD = 56;
    static final int SEND_SIMPLE_HEAD = 64;
    static final int SEND_SIMPLE_TAIL = 72;
    static final int STATE = 80;
    static final int RING_ORDER = 88;
    static final int RING_POSITION = 96;

    static final int ARGS_BYTES = 96;
    static final int ARG_COMM = 0;
    static final int ARG_SEND = 8;
    static final int ARG_RECV = 16;
    static final int ARG_COUNT = 24;
    static final int ARG_BLOCK = 32;
    static final int ARG_TOTAL = 40;
    static final int ARG_CHUNK = 48;
    static final int ARG_SLICE = 56;
    /**
     * The host's number for the call: the kernel reports it in the done word and records it with a failure.
     * The header's sequence number and the one-shot parity come from the call counters in device memory
     * instead, which the kernels advance themselves, so that a call replayed from a CUDA graph (whose
     * arguments are those of its capture) still takes the next ones.
     */
    static final int ARG_TICKET = 64;
    static final int ARG_KIND = 68;
    static final int ARG_TYPE = 72;
    static final int ARG_OP = 76;
    static final int ARG_PROTO = 80;
    static final int ARG_ROOT = 84;
    static final int ARG_NCHANNELS = 88;
    /** ARG_FLAG_* bits. */
    static final int ARG_FLAGS = 92;
    /**
     * A stream-ordered (or graph-captured) call: its kernel writes no done word and no start and end times
     * into mapped host memory (nobody polls them; each such write and its system-scope fence sit on the
     * kernel's critical path). Failures are still recorded in the status block.
     */
    static final int ARG_FLAG_STREAM = 1;

    /** Host status block (int[32] in mapped pinned memory): what the kernel tells the host. */
    static final int STATUS_BYTES = 128;
    static final int STATUS_HOST_ABORT = 0;
    static final int STATUS_CODE = 4;
    static final int STATUS_CHANNEL = 8;
    /** The ticket (ARG_TICKET) of the call whose kernel failed first. */
    static final int STATUS_FAILED_TICKET = 12;
    static final int STATUS_THEIR_HEADER = 32;
    static final int STATUS_MY_HEADER = 64;
    /** The sequence number of the last collective whose kernel finished (written by its last block). */
    static final int STATUS_DONE_SEQ = 96;
    /** globaltimer (ns) when block 0 of the last kernel started, and when its last block finished. */
    static final int STATUS_START_NS = 104;
    static final int STATUS_END_NS = 112;

    static final int CODE_OK = 0;
    static final int CODE_MISMATCH = 1;
    static final int CODE_PEER_ABORT = 2;
    static final int CODE_TIMEOUT = 3;
    static final int CODE_HOST_ABORT = 4;
    /** Host side only: the stream went idle but the kernel never wrote its done word. */
    static final int CODE_KERNEL_LOST = 100;

    /**
     * The GPU window's control block (the first {@code SegmentLayout.CONTROL_BYTES} of a window): the
     * CPU engine's magic, version, state and pid offsets, plus the secret and a probe word.
     */
    static final int WINDOW_SECRET = 32;
    /**
     * Probe words, one per rank that opens the window as a ring successor (a rank may have several ring
     * predecessors, one per channel's ring): in the control block's message area, which GPU windows do
     * not use.
     */
    static final int WINDOW_PROBES = 2048;
    static final int MAX_PROBING_RANKS = (SegmentLayout.CONTROL_BYTES - WINDOW_PROBES) / 8;

    private DevCommLayout() {
    }

    static int channel(int c) {
        return HEADER_BYTES + c * CHANNEL_BYTES;
    }

    /** The probe word rank {@code opener} writes in a successor's window: a word no other rank writes. */
    static long ringProbe(int opener) {
        if (opener >= MAX_PROBING_RANKS) {
            throw new IllegalArgumentException("rank " + opener + ": the GPU communicator connects at most "
                    + MAX_PROBING_RANKS + " ranks");
        }
        return WINDOW_PROBES + 8L * opener;
    }

    static int ll128Channel(int c) {
        return LL128 + c * LL128_CHANNEL_BYTES;
    }
}
