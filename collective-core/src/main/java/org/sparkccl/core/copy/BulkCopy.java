package org.sparkccl.core.copy;

import org.agrona.UnsafeApi;
import org.sparkccl.core.jdk.JdkAccess;
import org.sparkccl.core.os.LibC;
import org.sparkccl.core.param.Params;

/**
 * Copies of collective data, above all into memory that another core has read since it was last
 * written: a ring's send slots, the peers' outputs of a direct all-reduce, a one-shot area.
 *
 * <p>Why not {@code Unsafe.copyMemory}: HotSpot copies with vector stores, and a store to a cache
 * line that another core holds must first take the line back from that core. On the 2-core CI VM
 * (AMD EPYC, 2026-11-29) a 1 MB copy into lines the other core had read took 145-175 us, against
 * 22 us into lines nobody else touched (bench/cross_core_write.c, the JVM's copy alike). The C
 * library's memcpy copies from 8 KB to below the L2 size with {@code rep movsb}, which writes whole
 * lines without fetching them first: 31-45 us for the same megabyte (bench/cross_core_write.c, its
 * third line: 256 KB memcpy calls). So copies from {@link #NATIVE_MIN_BYTES} up call libc's memcpy through JNA
 * (direct mapping, about 95 ns a call), in pieces of at most {@link #PIECE_BYTES} (glibc leaves
 * rep movsb at the L2 size on AMD: a single 1 MB memcpy is as slow as the JVM's). Smaller copies,
 * JVMs where JNA cannot load, and {@code SPARKCCL_NATIVE_COPY=0} use {@code Unsafe.copyMemory}.
 *
 * <p>Read once per JVM (environment and {@code -Dsparkccl.nativeCopy}): every communicator in a
 * process copies the same way.
 */
public final class BulkCopy {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    /** Below this the JNA call costs more than the copy could save. */
    public static final long NATIVE_MIN_BYTES = 32 << 10;
    /** At most this much per memcpy call: inside glibc's rep movsb range on every x86 we know of. */
    public static final long PIECE_BYTES = 256 << 10;

    private static final String HOW;
    private static final boolean NATIVE;

    static {
        String how;
        boolean usable = false;
        if (!Params.fromEnvironment().get(Params.NATIVE_COPY)) {
            how = "the JVM's copy (SPARKCCL_NATIVE_COPY=0)";
        } else {
            String unavailable = LibC.unavailableReason();
            usable = unavailable == null;
            how = usable ? "libc memcpy through JNA from " + (NATIVE_MIN_BYTES >> 10) + " KB"
                    : "the JVM's copy (" + unavailable + ")";
        }
        HOW = how;
        NATIVE = usable;
    }

    private BulkCopy() {
    }

    /** Copies {@code bytes} from {@code src} to {@code dst}; the ranges must not overlap. */
    public static void copy(long src, long dst, long bytes) {
        if (!NATIVE || bytes < NATIVE_MIN_BYTES) {
            UnsafeApi.copyMemory(src, dst, bytes);
            return;
        }
        for (long done = 0; done < bytes; done += PIECE_BYTES) {
            LibC.memcpy(dst + done, src + done, Math.min(PIECE_BYTES, bytes - done));
        }
    }

    /** Whether copies from {@link #NATIVE_MIN_BYTES} up go to libc's memcpy in this JVM. */
    public static boolean isNative() {
        return NATIVE;
    }

    /** How this JVM copies, for the communicator's INFO log. */
    public static String describe() {
        return HOW;
    }
}
