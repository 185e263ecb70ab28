package org.sparkccl.arrow;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.NonWritableChannelException;
import java.nio.channels.SeekableByteChannel;
import org.apache.hadoop.fs.FSDataInputStream;

/**
 * A Hadoop input stream as the seekable channel Arrow's file reader needs (it seeks to the footer
 * first). Reads go through a small heap buffer: not every Hadoop stream can read into a direct
 * ByteBuffer, and checkpoints are read once per resume.
 */
final class HadoopReadChannel implements SeekableByteChannel {
    private static final int CHUNK = 1 << 20;

    private final FSDataInputStream in;
    private final long size;
    private byte[] chunk = new byte[0];
    private boolean open = true;

    HadoopReadChannel(FSDataInputStream in, long size) {
        this.in = in;
        this.size = size;
    }

    @Override
    public int read(ByteBuffer dst) throws IOException {
        if (!dst.hasRemaining()) {
            return 0;
        }
        if (dst.hasArray()) {
            int n = in.read(dst.array(), dst.arrayOffset() + dst.position(), dst.remaining());
            if (n > 0) {
                dst.position(dst.position() + n);
            }
            return n;
        }
        int want = Math.min(dst.remaining(), CHUNK);
        if (chunk.length < want) {
            chunk = new byte[want];
        }
        int n = in.read(chunk, 0, want);
        if (n > 0) {
            dst.put(chunk, 0, n);
        }
        return n;
    }

    @Override
    public int write(ByteBuffer src) {
        throw new NonWritableChannelException();
    }

    @Override
    public long position() throws IOException {
        return in.getPos();
    }

    @Override
    public SeekableByteChannel position(long newPosition) throws IOException {
        in.seek(newPosition);
        return this;
    }

    @Override
    public long size() {
        return size;
    }

    @Override
    public SeekableByteChannel truncate(long size) {
        throw new NonWritableChannelException();
    }

    @Override
    public boolean isOpen() {
        return open;
    }

    @Override
    public void close() throws IOException {
        if (open) {
            open = false;
            in.close();
        }
    }
}
