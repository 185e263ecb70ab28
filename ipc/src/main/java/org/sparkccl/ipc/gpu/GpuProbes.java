package org.sparkccl.ipc.gpu;

import java.util.Locale;
import org.sparkccl.ipc.cuda.CudaDevice;
import org.sparkccl.ipc.cuda.CudaStream;
import org.sparkccl.ipc.cuda.DeviceBuffer;

/**
 * Where the time of a one-shot all-reduce goes, as the GPU saw it (SPARKCCL_PROBE=1): the kernels
 * record globaltimer stamps at fixed points of each call into a ring of {@link #SLOTS} slots in device
 * memory (common.cuh, "Probes"); this class owns that ring and sums it up. globaltimer is one clock for
 * the whole GPU, so two ranks that share a GPU can be compared stamp by stamp, and the gap between one
 * call's end and the next one's start is the launch (or doorbell) in between.
 */
final class GpuProbes implements AutoCloseable {
    /** PROBE_SLOTS and PROBE_WORDS in common.cuh. */
    static final int SLOTS = 256;
    static final int WORDS = 8;
    static final int START = 0;
    static final int PUSHED = 1;
    static final int PEER = 2;
    static final int HEADER = 3;
    static final int BODY = 4;
    static final int END = 5;
    static final int BELL = 6;
    static final int SEQ = 7;

    private final DeviceBuffer ring;

    GpuProbes(CudaDevice device, CudaStream stream, String owner) {
        ring = DeviceBuffer.allocate(device, (long) SLOTS * WORDS * 8, owner + " probes");
        ring.fill((byte) 0, stream);
    }

    long address() {
        return ring.address();
    }

    /** The ring as it is now (the caller has waited for the calls it wants to see). */
    long[] read(CudaStream stream) {
        long[] words = new long[SLOTS * WORDS];
        ring.copyToArray(words, (long) words.length * 8, stream);
        return words;
    }

    /**
     * Mean microseconds between the stamps of the last {@code calls} calls up to sequence number
     * {@code lastSeq} (at most {@link #SLOTS} - 1), one line: start->pushed, ->peer's input seen, ->header
     * done, ->body end, ->end (after the fences), the gap from the previous call's end to this start, and
     * for resident calls the doorbell seen -> start.
     */
    static String summary(long[] words, long lastSeq, int calls) {
        int n = 0;
        double pushed = 0, peer = 0, header = 0, body = 0, end = 0, bell = 0;
        long[] gaps = new long[SLOTS];
        int ngaps = 0;
        long startSum = 0;
        long lastStart = words[Math.floorMod(lastSeq, SLOTS) * WORDS + START];
        for (long seq = lastSeq - Math.min(calls, SLOTS - 1) + 1; seq <= lastSeq; seq++) {
            int at = (int) (Math.floorMod(seq, SLOTS) * WORDS);
            if (words[at + SEQ] != seq) {
                continue; // not a one-shot call, or overwritten
            }
            long start = words[at + START];
            startSum += start - lastStart;
            pushed += words[at + PUSHED] - start;
            peer += words[at + PEER] - start;
            header += words[at + HEADER] - start;
            body += words[at + BODY] - start;
            end += words[at + END] - start;
            if (words[at + BELL] != 0) {
                bell += start - words[at + BELL];
            }
            int before = (int) (Math.floorMod(seq - 1, SLOTS) * WORDS);
            if (words[before + SEQ] == seq - 1) {
                gaps[ngaps++] = start - words[before + END];
            }
            n++;
        }
        if (n == 0) {
            return "no one-shot calls recorded";
        }
        return String.format(Locale.ROOT, "%d calls, us from start: pushed %.2f, peer seen %.2f, header %.2f,"
                        + " body %.2f, end %.2f; end -> next start (median) %.2f; doorbell seen -> start %.2f; last start %d ns,"
                        + " mean start %.1f ns before it (ranks on one GPU: the difference is their skew)",
                n, pushed / n / 1e3, peer / n / 1e3, header / n / 1e3, body / n / 1e3, end / n / 1e3,
                median(gaps, ngaps) / 1e3, bell / n / 1e3, lastStart,
                -(double) startSum / n);
    }

    /** The gaps include pauses between the benchmark's phases: their median, not their mean. */
    private static double median(long[] values, int n) {
        if (n == 0) {
            return 0;
        }
        long[] sorted = java.util.Arrays.copyOf(values, n);
        java.util.Arrays.sort(sorted);
        return sorted[n / 2];
    }

    @Override
    public void close() {
        ring.close();
    }
}
