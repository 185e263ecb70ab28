package org.sparkccl.core;

import org.sparkccl.core.jdk.JdkAccess;
import java.nio.ByteBuffer;
import org.agrona.BufferUtil;
import org.agrona.DirectBuffer;

/** Addresses of direct and Agrona buffers, with the checks every overload needs. */
public final class BufferAddresses {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    private BufferAddresses() {
    }

    public static long address(ByteBuffer buffer) {
        if (!buffer.isDirect()) {
            throw new IllegalArgumentException("collectives need a direct ByteBuffer (ByteBuffer.allocateDirect), "
                    + "or use the Java array overloads");
        }
        return BufferUtil.address(buffer);
    }

    public static long address(DirectBuffer buffer) {
        if (buffer.byteArray() != null) {
            throw new IllegalArgumentException("collectives need an Agrona buffer over off-heap memory, "
                    + "not over a byte[]; use the Java array overloads for heap data");
        }
        return buffer.addressOffset();
    }

    /** Element count of {@code bytes}, which must be a whole number of elements. */
    public static long count(long bytes, DataType type) {
        if (bytes % type.size() != 0) {
            throw new IllegalArgumentException(bytes + " bytes is not a whole number of " + type.ncclName()
                    + " elements (" + type.size() + " bytes each)");
        }
        return bytes / type.size();
    }

    public static void requireCapacity(long bytes, long count, DataType type, String what) {
        if (bytes < count * type.size()) {
            throw new IllegalArgumentException(what + " holds " + bytes + " bytes, needs " + count * type.size()
                    + " for " + count + " " + type.ncclName() + " elements");
        }
    }
}
