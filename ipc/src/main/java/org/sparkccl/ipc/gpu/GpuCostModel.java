package org.sparkccl.ipc.gpu;

import org.sparkccl.core.proto.Protocol;

/**
 * How long a ring all-reduce of {@code S} bytes over {@code n} ranks takes in each protocol, to the
 * first order, so that protocol thresholds follow from two numbers per protocol and link instead of
 * being guessed for every number of ranks:
 *
 * <pre>
 *   T(p, S, n) = 2 (n - 1) * alpha(p)  +  2 (n - 1) / n * S * perByte(p)
 * </pre>
 *
 * {@code alpha} is what one dependent step of the ring costs whatever its size (the peer's flag or
 * tail crossing the hop, the reader's poll, Simple's system fence); {@code perByte} the inverse of the
 * rate a ring moves data at. Two protocols cost the same at
 *
 * <pre>
 *   S* = n * (alpha(b) - alpha(a)) / (perByte(a) - perByte(b))
 * </pre>
 *
 * so the crossovers grow in proportion to the number of ranks. A constant every protocol pays alike
 * (launch, the header's LL step) cancels there.
 *
 * <p>Where the numbers come from (docs/perf/gpu-allreduce.md, "LL128"): {@link Link#ONE_GPU} was measured
 * on one H200 with two ranks as threads (kernel time of the forced ring, float32, 2026-12-01): alpha is
 * half the median kernel time of small calls (1 KB - 64 KB: two dependent steps at n = 2), perByte the
 * kernel time's slope between 16 and 32 MB. {@link Link#NVLINK} is not measured (no two-GPU machine was lent):
 * it is ONE_GPU plus what crossing NVLink adds, from this project's two-GPU measurements
 * (shared/device/README.md): half the 1.3 us flag round trip for a step whose data carries its flags (LL,
 * LL128), a round trip more for Simple (its system fence waits for the data to land before the tail
 * goes out), and a rate no better than the 390 GB/s peer copy times the protocol's share of data on the
 * wire (LL 8 of 16 bytes, LL128 120 of 128, Simple all). Measure it on two NVLinked GPUs before
 * trusting its crossovers.
 */
final class GpuCostModel {
    /** Per-step latency (ns) and per-byte cost (ns per byte of the message) of one protocol. */
    record Cost(double alphaNs, double nsPerByte) {
    }

    /** What the hops of the ring are: the slowest kind counts. */
    enum Link { ONE_GPU, NVLINK }

    // One H200, two ranks as threads, forced ring (GpuAllReduceBench kernel column): small-call kernel
    // time 14.6 / 18.1 / 16.4 us (LL / LL128 / Simple), 16 MB -> 32 MB slope 184.7 / 94.9 / 42.8 us, that
    // is 90.8 / 176.8 / 392 GB/s of message. (LL128 from the build with 128 registers per thread.)
    static final Cost ONE_GPU_LL = new Cost(7_300, 0.011_01);
    static final Cost ONE_GPU_LL128 = new Cost(9_070, 0.005_656);
    static final Cost ONE_GPU_SIMPLE = new Cost(8_200, 0.002_548);

    /** NVLink between two H200s (NV18), measured by this project: flag round trip and peer-copy rate. */
    static final double NVLINK_ROUND_TRIP_NS = 1_300;
    static final double NVLINK_BYTES_PER_NS = 390;

    private GpuCostModel() {
    }

    static Cost cost(Protocol p, Link link) {
        Cost local = switch (p) {
            case LL -> ONE_GPU_LL;
            case LL128 -> ONE_GPU_LL128;
            case SIMPLE -> ONE_GPU_SIMPLE;
        };
        if (link == Link.ONE_GPU) {
            return local;
        }
        double crossing = p == Protocol.SIMPLE ? 1.5 * NVLINK_ROUND_TRIP_NS : 0.5 * NVLINK_ROUND_TRIP_NS;
        double wireBytesPerDataByte = switch (p) {
            case LL -> 16.0 / 8;
            case LL128 -> 128.0 / 120;
            case SIMPLE -> 1.0;
        };
        return new Cost(local.alphaNs() + crossing,
                Math.max(local.nsPerByte(), wireBytesPerDataByte / NVLINK_BYTES_PER_NS));
    }

    /** Predicted time in ns of a ring all-reduce of {@code bytes} over {@code n} ranks. */
    static double timeNs(Protocol p, Link link, long bytes, int n) {
        Cost c = cost(p, link);
        return 2.0 * (n - 1) * c.alphaNs() + 2.0 * (n - 1) / n * bytes * c.nsPerByte();
    }

    /**
     * The message size in bytes up to which {@code a} is at least as fast as {@code b}, for {@code n}
     * ranks, where {@code a} has the lower per-step latency and {@code b} the lower per-byte cost; 0
     * where {@code a} is never faster, Long.MAX_VALUE where {@code b} never is.
     */
    static long crossoverBytes(Protocol a, Protocol b, Link link, int n) {
        Cost ca = cost(a, link);
        Cost cb = cost(b, link);
        double latency = cb.alphaNs() - ca.alphaNs();
        double perByte = ca.nsPerByte() - cb.nsPerByte();
        if (latency <= 0) {
            return perByte <= 0 ? Long.MAX_VALUE : 0;
        }
        if (perByte <= 0) {
            return Long.MAX_VALUE;
        }
        return (long) (n * latency / perByte);
    }

    /**
     * The sizes where LL128 beats both LL and Simple, as {from, upTo} (LL128 for from &lt; S &lt;= upTo);
     * from &gt;= upTo where it never does.
     */
    static long[] ll128Band(Link link, int n) {
        long from = crossoverBytes(Protocol.LL, Protocol.LL128, link, n);
        long upTo = crossoverBytes(Protocol.LL128, Protocol.SIMPLE, link, n);
        return new long[] {from, upTo};
    }

    /** True when LL128 beats LL and Simple at some size over {@code n} ranks, on some kind of link. */
    static boolean ll128EverWins(int n) {
        for (Link link : Link.values()) {
            long[] band = ll128Band(link, n);
            if (band[0] < band[1]) {
                return true;
            }
        }
        return false;
    }
}
