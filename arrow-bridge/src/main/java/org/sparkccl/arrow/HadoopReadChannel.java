package org.sparkccl.arrow;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.NonWritableChannelException;
import java.nio.channels.SeekableByteChannel;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.StreamCapabilities;

/**
 * A Hadoop input stream as the seekable channel Arrow's file reader needs (it seeks to the footer
 * first). Streams that can read into a ByteBuffer (HDFS) fill Arrow's direct buffers themselves;
 * others (the local file system's checksummed stream) go through a heap chunk.
 */
final class HadoopReadChannel implements SeekableByteChannel {
    private static final int CHUNK = 1 << 20;

    private final FSDataInputStream in;
    private final long size;
    private final boolean readsByteBuffers;
    private byte[] chunk = new byte[0];
    private boolean open = true;

    HadoopReadChannel(FSDataInputStream in, long size) {
        this.in = in;
        this.size = size;
        this.readsByteBuffers = in.hasCapability(StreamCapabilities.READBYTEBUFFER);
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
        if (readsByteBuffers) {
            return in.read(dst);
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
