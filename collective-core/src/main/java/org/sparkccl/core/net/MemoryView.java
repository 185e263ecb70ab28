package org.sparkccl.core.net;

import java.nio.Buffer;
import java.nio.ByteBuffer;
import org.agrona.BufferUtil;
import org.agrona.UnsafeApi;
import org.sparkccl.core.jdk.JdkAccess;

/**
 * A direct {@link ByteBuffer} that can be pointed at any native memory, so that a socket writes
 * straight from the caller's buffer (an address, as every collective gets it) instead of from a
 * copy. NIO has no public way to wrap an address; this sets a direct buffer's address and capacity
 * through Agrona's Unsafe, as JNI's NewDirectByteBuffer would. The view owns no memory: it is a slice
 * (no cleaner), and the caller keeps the memory alive while the view is in use. Not thread safe.
 */
final class MemoryView {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    private static final long CAPACITY_OFFSET = UnsafeApi.objectFieldOffset(Buffer.class, "capacity");
    private final ByteBuffer view = ByteBuffer.allocateDirect(1).slice();

    /** The view of {@code bytes} bytes at {@code address}, position 0, limit {@code bytes}; valid until the next call. */
    ByteBuffer at(long address, int bytes) {
        UnsafeApi.putLong(view, BufferUtil.BYTE_BUFFER_ADDRESS_FIELD_OFFSET, address);
        UnsafeApi.putInt(view, CAPACITY_OFFSET, bytes);
        return view.clear();
    }
}
