package org.sparkccl.core.shm;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.MappedByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.agrona.IoUtil;
import org.agrona.concurrent.UnsafeBuffer;
import org.sparkccl.core.jdk.JdkAccess;

/**
 * One mapping of one /dev/shm file, shared by every handle of this JVM that uses it and unmapped
 * when the last one is released. Unmapping while another thread still reads the memory would crash
 * the JVM, which is why same-process peers share this object (counted) rather than the file.
 */
final class ShmSegment {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    /** Bytes of /dev/shm mapped by this JVM right now, over every transport. */
    private static final AtomicLong MAPPED_IN_JVM = new AtomicLong();

    final String name;
    final Path path;
    final long bytes;
    /** True for a segment this process created: it removes the name when it is done. */
    final boolean owned;
    /** The secret in the file's header ({@link ShmSegmentHeader}): same-process peers check it here. */
    final byte[] secret;

    private final MappedByteBuffer mapping;
    private final AtomicInteger refs = new AtomicInteger(1);
    private final AtomicBoolean nameRemoved = new AtomicBoolean();
    private final Runnable onUnmap;

    /** Takes over {@code mapping}, with one reference held by the caller. */
    ShmSegment(String name, Path path, long bytes, boolean owned, byte[] secret, MappedByteBuffer mapping,
               Runnable onUnmap) {
        this.name = name;
        this.path = path;
        this.bytes = bytes;
        this.owned = owned;
        this.secret = secret.clone();
        this.mapping = mapping;
        this.onUnmap = onUnmap;
        MAPPED_IN_JVM.addAndGet(bytes);
    }

    static long mappedBytesInJvm() {
        return MAPPED_IN_JVM.get();
    }

    /** A fresh buffer over the whole mapping (each handle gets its own, so one wrap() cannot move another's). */
    UnsafeBuffer newBuffer() {
        return new UnsafeBuffer(mapping, 0, (int) bytes);
    }

    /** Takes one more reference; false when the segment is already unmapped. */
    boolean retain() {
        while (true) {
            int r = refs.get();
            if (r == 0) {
                return false;
            }
            if (refs.compareAndSet(r, r + 1)) {
                return true;
            }
        }
    }

    void release() {
        int r = refs.decrementAndGet();
        if (r == 0) {
            onUnmap.run();
            if (owned) {
                removeName();
            }
            IoUtil.unmap(mapping);
            MAPPED_IN_JVM.addAndGet(-bytes);
        } else if (r < 0) {
            throw new IllegalStateException("segment " + name + " released more often than retained");
        }
    }

    /** Deletes the file; the memory stays mapped. Only the owner calls this. Returns true the first time. */
    boolean removeName() {
        if (!nameRemoved.compareAndSet(false, true)) {
            return false;
        }
        try {
            Files.deleteIfExists(path);
            return true;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot remove " + path + ": " + e.getMessage(), e);
        }
    }

    boolean nameRemoved() {
        return nameRemoved.get();
    }
}
