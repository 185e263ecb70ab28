package org.sparkccl.core.transport;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import org.sparkccl.core.wire.WireFormat;

/**
 * What a rank tells its peers in the single bootstrap round: where it runs and the connect blobs of
 * the memory it exposes, keyed by transport name (a GPU backend adds its own entries). The binary
 * form is a sealed {@link WireFormat}; a description of another version or a damaged one is refused.
 */
public final class RankInfo {
    /** Version 2: sealed (body length and CRC32C). */
    static final WireFormat FORMAT = WireFormat.sealed("rank description", 0x53434331, 2); // "SCC1"
    private static final int MAX_ENTRIES = 1024;

    private final int rank;
    private final int size;
    private final String hostId;
    private final long pid;
    private final long shmDevice;
    private final Map<String, byte[]> entries;

    public RankInfo(int rank, int size, String hostId, long pid, long shmDevice, Map<String, byte[]> entries) {
        this.rank = rank;
        this.size = size;
        this.hostId = Objects.requireNonNull(hostId);
        this.pid = pid;
        this.shmDevice = shmDevice;
        this.entries = Collections.unmodifiableMap(new LinkedHashMap<>(entries));
    }

    /** This process, with no entries yet. */
    public static RankInfo local(int rank, int size) {
        return new RankInfo(rank, size, HostIdentity.hostId(), HostIdentity.pid(), HostIdentity.shmDevice(), Map.of());
    }

    public RankInfo withEntry(String key, byte[] value) {
        Map<String, byte[]> e = new LinkedHashMap<>(entries);
        e.put(key, value.clone());
        return new RankInfo(rank, size, hostId, pid, shmDevice, e);
    }

    public int rank() {
        return rank;
    }

    public int size() {
        return size;
    }

    public String hostId() {
        return hostId;
    }

    public long pid() {
        return pid;
    }

    public long shmDevice() {
        return shmDevice;
    }

    public boolean sameHost(RankInfo other) {
        return hostId.equals(other.hostId);
    }

    /** How many of {@code all} are on this rank's host (this rank included, if it is in {@code all}). */
    public int ranksOnHost(RankInfo[] all) {
        int n = 0;
        for (RankInfo other : all) {
            if (sameHost(other)) {
                n++;
            }
        }
        return n;
    }

    public boolean sameProcess(RankInfo other) {
        return sameHost(other) && pid == other.pid;
    }

    /** The entry under {@code key}, or null. */
    public byte[] entry(String key) {
        byte[] v = entries.get(key);
        return v == null ? null : v.clone();
    }

    public Map<String, byte[]> entries() {
        return entries;
    }

    public byte[] encode() {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (DataOutputStream out = new DataOutputStream(bytes)) {
            out.writeInt(rank);
            out.writeInt(size);
            out.writeUTF(hostId);
            out.writeLong(pid);
            out.writeLong(shmDevice);
            out.writeInt(entries.size());
            for (Map.Entry<String, byte[]> e : entries.entrySet()) {
                out.writeUTF(e.getKey());
                out.writeInt(e.getValue().length);
                out.write(e.getValue());
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return FORMAT.seal(bytes.toByteArray());
    }

    /** Decodes what rank {@code expectedRank} sent; refuses foreign, damaged or mismatched descriptions. */
    public static RankInfo decode(byte[] data, int expectedRank, int expectedSize) {
        String from = "rank " + expectedRank;
        ByteBuffer body = FORMAT.open(data, from);
        try (DataInputStream in = new DataInputStream(
                new ByteArrayInputStream(body.array(), body.arrayOffset(), body.remaining()))) {
            int rank = in.readInt();
            int size = in.readInt();
            if (rank != expectedRank || size != expectedSize) {
                throw FORMAT.refused(from, "it says rank " + rank + " of " + size + ", expected rank " + expectedRank
                        + " of " + expectedSize, "it belongs to another communicator or job");
            }
            String hostId = in.readUTF();
            long pid = in.readLong();
            long shmDevice = in.readLong();
            int n = in.readInt();
            if (n < 0 || n > MAX_ENTRIES) {
                throw FORMAT.malformed(from, n + " entries, at most " + MAX_ENTRIES + " expected");
            }
            Map<String, byte[]> entries = new LinkedHashMap<>();
            for (int i = 0; i < n; i++) {
                String key = in.readUTF();
                int len = in.readInt();
                if (len < 0 || len > in.available()) {
                    throw FORMAT.malformed(from, "entry '" + key + "' of " + len + " bytes, " + in.available()
                            + " left");
                }
                byte[] v = new byte[len];
                in.readFully(v);
                entries.put(key, v);
            }
            if (in.available() != 0) {
                throw FORMAT.malformed(from, in.available() + " bytes after the last entry");
            }
            return new RankInfo(rank, size, hostId, pid, shmDevice, entries);
        } catch (IOException e) {
            throw FORMAT.malformed(from, "its body ends inside a field (" + e + ")", e);
        }
    }

    @Override
    public String toString() {
        return "rank " + rank + " (host " + hostId + ", pid " + pid + ")";
    }
}
