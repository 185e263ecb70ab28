package org.sparkccl.core.os;

import com.sun.jna.LastErrorException;
import com.sun.jna.Native;
import com.sun.jna.Platform;
import com.sun.jna.Pointer;

/**
 * The C library, bound once for the whole project through JNA's direct mapping (native methods, no
 * Pointer objects where a plain address will do; about 95 ns a call). Every call sparkccl makes to
 * libc goes through here: memcpy for bulk copies ({@code BulkCopy}), sched_setaffinity for benchmark
 * ranks, and the Unix-domain socket calls that pass a file descriptor to another process
 * ({@link DescriptorServer}).
 *
 * <p>The first use of any method binds them all; where JNA or a symbol is missing that use throws a
 * {@link LinkageError}, and so does every later one. {@link #unavailableReason()} asks without throwing.
 * Struct layouts built by callers are those of Linux on 64-bit machines (x86-64, aarch64).
 */
public final class LibC {
    public static final int AF_UNIX = 1;
    public static final int SOCK_STREAM = 1;
    public static final int SOCK_CLOEXEC = 0x80000;
    public static final int SOL_SOCKET = 1;
    public static final int SO_RCVTIMEO = 20;
    public static final int SO_SNDTIMEO = 21;
    public static final int SCM_RIGHTS = 1;
    public static final int MSG_CTRUNC = 0x8;
    public static final int MSG_NOSIGNAL = 0x4000;
    public static final int MSG_CMSG_CLOEXEC = 0x40000000;
    public static final int SHUT_RDWR = 2;
    public static final int EINTR = 4;
    public static final int EAGAIN = 11;
    public static final int ECONNREFUSED = 111;

    private static final String UNAVAILABLE;

    static {
        String reason = null;
        try {
            Native.register(LibC.class, Platform.C_LIBRARY_NAME);
        } catch (LinkageError | RuntimeException e) {
            reason = "libc through JNA unavailable: " + e;
        }
        UNAVAILABLE = reason;
    }

    private LibC() {
    }

    /** Null when the calls below work in this JVM, else why not. */
    public static String unavailableReason() {
        return UNAVAILABLE;
    }

    public static native long memcpy(long dst, long src, long bytes);

    /** pid 0: the calling thread. */
    public static native int sched_setaffinity(int pid, long cpusetsize, long[] mask) throws LastErrorException;

    public static native int socket(int domain, int type, int protocol) throws LastErrorException;

    public static native int bind(int fd, byte[] address, int addressLength) throws LastErrorException;

    public static native int listen(int fd, int backlog) throws LastErrorException;

    public static native int accept4(int fd, Pointer address, Pointer addressLength, int flags)
            throws LastErrorException;

    public static native int connect(int fd, byte[] address, int addressLength) throws LastErrorException;

    /** {@code timeval} options (SO_RCVTIMEO, SO_SNDTIMEO) as {seconds, microseconds}. */
    public static native int setsockopt(int fd, int level, int option, long[] value, int length)
            throws LastErrorException;

    public static native long sendmsg(int fd, Pointer message, int flags) throws LastErrorException;

    public static native long recvmsg(int fd, Pointer message, int flags) throws LastErrorException;

    public static native long send(int fd, byte[] buffer, long length, int flags) throws LastErrorException;

    public static native long recv(int fd, byte[] buffer, long length, int flags) throws LastErrorException;

    public static native int shutdown(int fd, int how) throws LastErrorException;

    public static native int close(int fd) throws LastErrorException;
}
