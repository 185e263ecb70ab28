package org.sparkccl.ipc.gpu;

import org.sparkccl.core.proto.Protocol;

/**
 * How long a ring all-reduce of {@code bytes} over {@code n} ranks takes in each protocol, to the
 * first order, so that the protocol thresholds follow from two numbers per protocol instead of being
 * guessed for every number of ranks:
 *
 * <pre>
 *   T(p, S, n) = 2 (n - 1) * alpha(p)  +  2 (n - 1) / n * S * perByte(p)
 * </pre>
 *
 * {@code alpha} is what one dependent step of the ring costs whatever its size (the peer's flag or
 * tail crossing the link, the reader's poll, Simple's system fence); {@code perByte} the inverse of
 * the rate one step moves data at (LL sends 8 flag bytes with every 8 data bytes, LL128 8 with every
 * 120, Simple none). Two protocols cost the same where
 *
 * <pre>
 *   S* = n * (alpha(b) - alpha(a)) / (perByte(a) - perByte(b))
 * </pre>
 *
 * so the crossovers grow in proportion to the number of ranks. The numbers are measured, per call, on
 * the machine named at each constant (docs/perf/gpu-allreduce.md); other links (NVLink between two
 * GPUs) need their own measurement.
 */
final class GpuCostModel {
    /** Per-step latency (ns) and per-byte cost (ns per byte) of one protocol. */
    record Cost(double alphaNs, double nsPerByte) {
    }

    // Placeholders until measured (see docs/perf/gpu-allreduce.md); replaced by the measured fit.
    static final Cost LL = new Cost(2_000, 1.0 / 40);
    static final Cost LL128 = new Cost(2_500, 1.0 / 120);
    static final Cost SIMPLE = new Cost(6_000, 1.0 / 200);

    private GpuCostModel() {
    }

    static Cost cost(Protocol p) {
        return switch (p) {
            case LL -> LL;
            case LL128 -> LL128;
            case SIMPLE -> SIMPLE;
        };
    }

    /** Predicted time in ns of a ring all-reduce of {@code bytes} over {@code n} ranks in protocol {@code p}. */
    static double timeNs(Protocol p, long bytes, int n) {
        Cost c = cost(p);
        return 2.0 * (n - 1) * c.alphaNs() + 2.0 * (n - 1) / n * bytes * c.nsPerByte();
    }

    /**
     * The message size in bytes up to which {@code faster} (the protocol with the lower step latency)
     * is at least as fast as {@code wider} (the one with the lower per-byte cost), for {@code n} ranks.
     */
    static long crossoverBytes(Protocol faster, Protocol wider, int n) {
        Cost a = cost(faster);
        Cost b = cost(wider);
        double perByte = a.nsPerByte() - b.nsPerByte();
        if (perByte <= 0) {
            return Long.MAX_VALUE;
        }
        return (long) (n * (b.alphaNs() - a.alphaNs()) / perByte);
    }
}
