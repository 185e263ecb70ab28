package org.sparkccl.core.net;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.Arrays;
import java.util.List;
import java.util.function.Predicate;
import org.sparkccl.core.Bootstrap;
import org.sparkccl.core.CclException;
import org.sparkccl.core.transport.RankInfo;

/**
 * The one real bootstrap round, on behalf of an engine that reaches a limited set of ranks (the
 * shared-memory engine: one host's /dev/shm; the GPU engine: one machine's GPUs): each rank's bytes
 * carry its {@link RankInfo} too (host id, socket address, secret share). When the gathered ranks are
 * not all within the engine's reach, the engine's construction ends with {@link OutOfReach} (it cleans
 * up as after any failure) and the caller builds over sockets from {@link #all()}: still one round.
 */
public final class SplitRound implements Bootstrap {
    private final Bootstrap real;
    private final RankInfo mine;
    private final Predicate<List<RankInfo>> withinReach;
    private final String outOfReach;
    private RankInfo[] all;

    /**
     * {@code withinReach} decides, from the gathered descriptions alone (so every rank alike), whether the
     * engine can connect them all; {@code outOfReach} says why not, for {@link OutOfReach}'s message.
     */
    public SplitRound(Bootstrap real, RankInfo mine, Predicate<List<RankInfo>> withinReach, String outOfReach) {
        this.real = real;
        this.mine = mine;
        this.withinReach = withinReach;
        this.outOfReach = outOfReach;
    }

    /** Thrown into the engine's construction when its peers are not all within its reach. */
    public static final class OutOfReach extends CclException {
        OutOfReach(String message) {
            super(message);
        }
    }

    /** Every rank's description, by rank; null before the round. */
    public RankInfo[] all() {
        return all == null ? null : all.clone();
    }

    @Override
    public int rank() {
        return real.rank();
    }

    @Override
    public int size() {
        return real.size();
    }

    @Override
    public byte[][] allGather(byte[] engineBytes) {
        if (all != null) {
            throw new IllegalStateException("rank " + rank() + ": the engine asked for a second bootstrap round");
        }
        byte[][] gathered = real.allGather(join(mine.encode(), engineBytes));
        RankInfo[] infos = new RankInfo[gathered.length];
        byte[][] engineParts = new byte[gathered.length][];
        for (int r = 0; r < gathered.length; r++) {
            byte[][] parts = split(gathered[r], r);
            infos[r] = RankInfo.decode(parts[0], r, gathered.length);
            engineParts[r] = parts[1];
        }
        all = infos;
        if (!withinReach.test(Arrays.asList(infos))) {
            throw new OutOfReach("rank " + rank() + ": " + outOfReach + ": the socket transport connects them");
        }
        return engineParts;
    }

    @Override
    public void barrier() {
        real.barrier();
    }

    private static byte[] join(byte[] a, byte[] b) {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (DataOutputStream out = new DataOutputStream(bytes)) {
            out.writeInt(a.length);
            out.write(a);
            out.writeInt(b.length);
            out.write(b);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return bytes.toByteArray();
    }

    private static byte[][] split(byte[] joined, int from) {
        try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(joined))) {
            byte[][] parts = new byte[2][];
            for (int i = 0; i < 2; i++) {
                int n = in.readInt();
                if (n < 0 || n > joined.length) {
                    throw new IOException("bad length " + n);
                }
                parts[i] = new byte[n];
                in.readFully(parts[i]);
            }
            return parts;
        } catch (IOException e) {
            throw new CclException("the description from rank " + from + " is damaged (" + e.getMessage()
                    + "); run the same sparkccl build on every executor", e);
        }
    }
}
