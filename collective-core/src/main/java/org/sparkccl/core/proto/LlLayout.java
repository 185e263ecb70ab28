package org.sparkccl.core.proto;

/**
 * The LL (low-latency) wire format, shared by the CPU and GPU engines.
 *
 * <pre>
 *  one LL word (8 bytes, one atomic store)       one LL line (16 bytes, one vector store on GPUs)
 *  +----------------+----------------+          +--------+--------+--------+--------+
 *  | data (4 bytes) | flag (4 bytes) |          | data0  | flag   | data1  | flag   |
 *  +----------------+----------------+          +--------+--------+--------+--------+
 *  byte 0           byte 4                      byte 0   4        8        12
 *
 *  LL buffer of one channel: STEPS slots, each SLOT_WORDS words
 *  +--------+--------+-----+--------+
 *  | slot 0 | slot 1 | ... | slot 7 |      step s uses slot s % STEPS and flag (int) (s + 1)
 *  +--------+--------+-----+--------+
 * </pre>
 *
 * The flag comes after the data in the word so that, whatever the store order inside a word, a
 * reader never sees the new flag with old data: the word is written with one 8-byte release store
 * and read with one 8-byte acquire load. There is no separate "data ready" signal: the reader polls
 * the flags, which is why small messages are fast, and half the bytes on the wire are flags, which
 * is why large ones are not. The flag is the step number plus one, so a slot's stale content from
 * an earlier use (STEPS steps ago) never looks current, and zeroed memory never does either.
 * Senders wait for the receiver's LL head (see {@link ChannelLayout}) only before reusing a slot.
 */
public final class LlLayout {
    public static final int WORD_BYTES = 8;
    public static final int DATA_BYTES_PER_WORD = 4;
    public static final int LINE_BYTES = 16;

    private LlLayout() {
    }

    /** The word as stored: data in the low 4 bytes (first in memory), flag in the high 4 bytes. */
    public static long word(int data, int flag) {
        return (data & 0xffffffffL) | ((long) flag << 32);
    }

    public static int data(long word) {
        return (int) word;
    }

    public static int flag(long word) {
        return (int) (word >>> 32);
    }

    /** The flag that marks step {@code step} as written. */
    public static int flagOfStep(long step) {
        return (int) (step + 1);
    }

    /** Wire bytes that carry {@code dataBytes} of payload. */
    public static long wireBytes(long dataBytes) {
        return ((dataBytes + DATA_BYTES_PER_WORD - 1) / DATA_BYTES_PER_WORD) * WORD_BYTES;
    }
}
