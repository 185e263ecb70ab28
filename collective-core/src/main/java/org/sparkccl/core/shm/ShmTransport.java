package org.sparkccl.core.shm;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.AccessDeniedException;
import java.nio.file.DirectoryStream;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.FileAttribute;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;
import org.sparkccl.core.CclException;
import org.sparkccl.core.log.CclLog;
import org.sparkccl.core.log.Subsys;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.transport.ExposedRegion;
import org.sparkccl.core.transport.HostIdentity;
import org.sparkccl.core.transport.MemoryTransport;
import org.sparkccl.core.transport.RankInfo;
import org.sparkccl.core.transport.SharedRegion;

/**
 * Host shared memory between processes of one machine, through files in /dev/shm that each side
 * maps, as NCCL's SHM transport does.
 *
 * <ul>
 *   <li>Segments are created with mode 0600 (at creation, never widened), named
 *       {@code sparkccl-<pid>-<128 random bits>}, start with a one-page header holding a random
 *       secret that the connect blob carries too ({@link ShmSegmentHeader}: a peer maps nothing of a
 *       file whose secret is not its blob's), and are filled with zeros by writing them: tmpfs
 *       allocates pages lazily, and a /dev/shm that runs out while a mapped page is first touched
 *       kills the process with SIGBUS, whereas a write fails cleanly with ENOSPC here. Measured
 *       on the 2-core CI VM: 1 ms for 1 MiB, 7 ms for 16 MiB, 190 ms for 256 MiB (the mapping's
 *       first pass then takes its page faults, as it would anyway); touching each page through the
 *       mapping instead costs as much as those faults (2.6 s for 256 MiB) and still risks SIGBUS.</li>
 *   <li>Free space is checked before anything is allocated; a /dev/shm that is too small is reported
 *       with the size needed and the usual fix.</li>
 *   <li>The owner unlinks the name once every peer has the segment mapped; the mappings live on.</li>
 *   <li>Ranks in the same JVM open the owner's mapping (counted) rather than the file, so that they
 *       work after the name is gone and nothing is unmapped under a thread that still uses it.</li>
 *   <li>What a dead process left is removed by survivors ({@link #cleanUpAfter}) or by the next
 *       process that exposes a segment here (stale scan of dead pids).</li>
 * </ul>
 *
 * Thread-safe. Closing the transport closes what is still open through it, with a warning.
 */
public final class ShmTransport implements MemoryTransport {
    public static final String NAME = "SHM";
    static final Path DEFAULT_DIRECTORY = Paths.get("/dev/shm");
    static final long PAGE_SIZE = 4096;
    /**
     * A segment of a dead pid is removed by the stale scan only once it is this old: a process in
     * another PID namespace that shares /dev/shm (docker --ipc=host) looks dead from here, and its
     * segments are named only for the bootstrap round, so waiting keeps us from deleting them.
     */
    static final Duration STALE_AFTER = Duration.ofMinutes(2);

    private static final FileAttribute<Set<PosixFilePermission>> OWNER_ONLY =
            PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------"));
    /**
     * Source of the zeros written into new segments; only ever read, so threads share it. 1 MiB
     * writes ran at 1.9 GB/s into tmpfs here, 256 KiB at 1.6, 64 KiB at 1.3.
     */
    private static final ByteBuffer ZEROS = ByteBuffer.allocateDirect(1 << 20);
    /** Segments this JVM created and has not unmapped, by name: same-process peers open these. */
    private static final Map<String, ShmSegment> OWNED_IN_JVM = new ConcurrentHashMap<>();
    private static final Set<Path> SCANNED_DIRECTORIES = ConcurrentHashMap.newKeySet();
    private static final AtomicBoolean SHUTDOWN_HOOK = new AtomicBoolean();

    private final Params params;
    private final CclLog log;
    private final Path directory;
    private final LongSupplier freeSpace;
    private final String hostId;
    private final byte[] hostDigest;
    private final long pid;
    private final AtomicLong outstanding = new AtomicLong();
    private final Set<ShmRegion> open = ConcurrentHashMap.newKeySet();

    public ShmTransport(Params params) {
        this(params, new CclLog(-1, params));
    }

    public ShmTransport(Params params, CclLog log) {
        this(params, log, DEFAULT_DIRECTORY, null, HostIdentity.hostId(params));
    }

    /**
     * For tests: another directory, a fake free-space reading (null reads the file store), another
     * host id.
     */
    ShmTransport(Params params, CclLog log, Path directory, LongSupplier freeSpace, String hostId) {
        this.params = params;
        this.log = log;
        this.directory = directory;
        this.freeSpace = freeSpace != null ? freeSpace : this::usableSpace;
        this.hostId = hostId;
        this.hostDigest = ShmConnectBlob.hostDigest(hostId);
        this.pid = HostIdentity.pid();
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public String unavailableReason() {
        if (params.get(Params.SHM_DISABLE)) {
            return "SHM is disabled (" + Params.SHM_DISABLE.envName() + "=1)";
        }
        if (!Files.isDirectory(directory)) {
            return directory + " does not exist, so there is no POSIX shared memory here";
        }
        if (!Files.isWritable(directory)) {
            return directory + " is not writable by this user";
        }
        return null;
    }

    @Override
    public String cannotConnectReason(RankInfo me, RankInfo peer) {
        if (params.get(Params.SHM_DISABLE)) {
            return "SHM is disabled (" + Params.SHM_DISABLE.envName() + "=1)";
        }
        if (!me.sameHost(peer)) {
            return "rank " + peer.rank() + " runs on another host (" + peer.hostId() + ", this is " + me.hostId() + ")";
        }
        if (me.shmDevice() < 0 || peer.shmDevice() < 0) {
            return "rank " + (me.shmDevice() < 0 ? me.rank() : peer.rank()) + " has no /dev/shm";
        }
        if (me.shmDevice() != peer.shmDevice()) {
            return "rank " + peer.rank() + " sees another /dev/shm (device " + peer.shmDevice() + ", this rank "
                    + me.shmDevice() + "): the containers share no /dev/shm mount (docker --ipc, a shared emptyDir)";
        }
        return null;
    }

    @Override
    public ExposedRegion expose(long bytes, String label) {
        String why = unavailableReason();
        if (why != null) {
            throw new CclException("cannot create shared memory for " + label + ": " + why);
        }
        if (bytes <= 0 || bytes > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("shared-memory region for " + label + " of " + bytes
                    + " bytes is out of range (1 byte .. 2 GiB - 1)");
        }
        if (SCANNED_DIRECTORIES.add(directory)) {
            removeStaleSegments(STALE_AFTER);
        }
        long needed = fileBytes(bytes);
        long free = freeSpace.getAsLong();
        if (free < needed) {
            throw new CclException(tooSmallMessage(label, needed, free));
        }
        String name = ShmSegmentName.newName(pid);
        Path path = directory.resolve(name);
        byte[] secret = ShmSegmentHeader.newSecret();
        MappedByteBuffer mapping = createZeroFilled(path, bytes, secret, label);
        ShmSegment segment = new ShmSegment(name, path, bytes, true, secret, mapping, () -> OWNED_IN_JVM.remove(name));
        OWNED_IN_JVM.put(name, segment);
        installShutdownHook();
        ShmExposedRegion region;
        try {
            byte[] blob = new ShmConnectBlob(pid, bytes, hostDigest, secret, name).encode();
            region = new ShmExposedRegion(segment, label, blob,
                    () -> log.info(Subsys.SHM, "unlinked %s (%s); it stays mapped", path, label), this::closed);
        } catch (RuntimeException | Error e) {
            segment.release(); // unmaps and removes the file
            throw e;
        }
        track(region);
        log.info(Subsys.SHM, "created segment %s: %d bytes for %s", path, bytes, label);
        return region;
    }

    /** The header page, then {@code bytes} of region, zero-filled; maps the region. */
    private MappedByteBuffer createZeroFilled(Path path, long bytes, byte[] secret, String label) {
        boolean created = false;
        try (FileChannel channel = FileChannel.open(path, EnumSet.of(StandardOpenOption.CREATE_NEW,
                StandardOpenOption.READ, StandardOpenOption.WRITE), OWNER_ONLY)) {
            created = true;
            writeZeros(channel, ShmSegmentHeader.BYTES + bytes);
            ShmSegmentHeader.write(channel, secret);
            return channel.map(FileChannel.MapMode.READ_WRITE, ShmSegmentHeader.BYTES, bytes);
        } catch (FileAlreadyExistsException e) {
            throw new CclException("cannot create " + path + " for " + label + ": the name is taken (128 random bits"
                    + " collided, or someone is guessing names)", e);
        } catch (IOException e) {
            if (created) {
                deleteQuietly(path);
            }
            String message = String.valueOf(e.getMessage());
            if (message.contains("No space left")) {
                throw new CclException(tooSmallMessage(label, fileBytes(bytes), usableSpaceOrMinusOne())
                        + " (ran out while allocating: another process took the space)", e);
            }
            throw new CclException("cannot create shared memory " + path + " of " + bytes + " bytes for " + label
                    + ": " + e, e);
        } catch (RuntimeException | Error e) {
            if (created) {
                deleteQuietly(path);
            }
            throw e;
        }
    }

    /** Writes {@code bytes} zeros: this is what makes tmpfs allocate every page now. */
    private static void writeZeros(FileChannel channel, long bytes) throws IOException {
        ByteBuffer zeros = ZEROS.duplicate();
        long position = 0;
        while (position < bytes) {
            zeros.clear();
            zeros.limit((int) Math.min(zeros.capacity(), bytes - position));
            while (zeros.hasRemaining()) {
                position += channel.write(zeros, position);
            }
        }
    }

    @Override
    public SharedRegion open(byte[] connectBlob, RankInfo owner) {
        String from = owner == null ? "a peer" : owner.toString();
        ShmConnectBlob blob = ShmConnectBlob.decode(connectBlob, from);
        if (!blob.sameHostAs(hostDigest)) {
            throw ShmConnectBlob.FORMAT.refused(from, "it was made on another host (its host id differs from this"
                    + " one, " + hostId + ")", "shared memory connects ranks of one machine only, so the descriptions"
                    + " were mixed up or the transport choice is wrong");
        }
        if (owner != null && owner.pid() != blob.pid) {
            throw ShmConnectBlob.FORMAT.refused(from, "it names pid " + blob.pid + ", but that rank runs as pid "
                    + owner.pid(), "the descriptions were mixed up");
        }
        String label = "segment of " + from;
        if (blob.pid == pid) {
            ShmSegment mine = OWNED_IN_JVM.get(blob.name);
            if (mine != null) {
                ShmSegmentHeader.checkSecret(mine.secret, blob.secret, mine.path, from);
                checkRegionBytes(mine.path, mine.bytes, blob, from);
            }
            if (mine != null && mine.retain()) {
                ShmRegion region = new ShmRegion(mine, label, this::closed);
                track(region);
                log.trace(Subsys.SHM, "opened %s from this process's own mapping", blob.name);
                return region;
            }
            // Not ours after all (another PID namespace with the same pid), or already closed: try the file.
        }
        ShmRegion region = new ShmRegion(mapPeerSegment(blob, from), label, this::closed);
        track(region);
        log.trace(Subsys.SHM, "mapped %s (%d bytes) of %s", blob.name, blob.bytes, from);
        return region;
    }

    private ShmSegment mapPeerSegment(ShmConnectBlob blob, String from) {
        Path path = directory.resolve(blob.name);
        try (FileChannel channel = FileChannel.open(path, StandardOpenOption.READ, StandardOpenOption.WRITE,
                LinkOption.NOFOLLOW_LINKS)) {
            ShmSegmentHeader.check(channel, blob.secret, path, from);
            checkRegionBytes(path, channel.size() - ShmSegmentHeader.BYTES, blob, from);
            MappedByteBuffer mapping = channel.map(FileChannel.MapMode.READ_WRITE, ShmSegmentHeader.BYTES, blob.bytes);
            return new ShmSegment(blob.name, path, blob.bytes, false, blob.secret, mapping, () -> { });
        } catch (NoSuchFileException e) {
            throw new CclException("the shared memory of " + from + " is gone (" + path + "): its owner closed or"
                    + " unlinked it before this rank opened it, or the process died", e);
        } catch (AccessDeniedException e) {
            throw new CclException("cannot open the shared memory of " + from + " (" + path + "): permission denied;"
                    + " every rank of a host must run as the same user", e);
        } catch (IOException e) {
            throw new CclException("cannot map the shared memory of " + from + " (" + path + "): " + e, e);
        }
    }

    /** Throws unless the segment's region has the size that the blob names. */
    private static void checkRegionBytes(Path path, long regionBytes, ShmConnectBlob blob, String from) {
        if (regionBytes != blob.bytes) {
            throw new CclException(path + " of " + from + " holds " + regionBytes + " bytes behind its header, its"
                    + " connect blob says " + blob.bytes + ": the blob is stale or damaged, or the file was replaced");
        }
    }

    @Override
    public void cleanUpAfter(long deadPid) {
        if (deadPid == pid) {
            // Called on a failure path; throwing here would hide the real error. Our own segments
            // are closed by their owners.
            log.warn(Subsys.SHM, "asked to clean up after pid %d, which is this live process: nothing removed", deadPid);
            return;
        }
        int removed = 0;
        for (Path path : segmentFiles()) {
            if (ShmSegmentName.ownerPid(path.getFileName().toString()) == deadPid && deleteQuietly(path)) {
                removed++;
            }
        }
        if (removed > 0) {
            log.info(Subsys.SHM, "removed %d segment(s) of dead process %d from %s", removed, deadPid, directory);
        }
    }

    /**
     * Removes segments whose owner pid is not alive and which are at least {@code minAge} old.
     * Returns how many were removed.
     */
    int removeStaleSegments(Duration minAge) {
        Instant cutoff = Instant.now().minus(minAge);
        int removed = 0;
        for (Path path : segmentFiles()) {
            long owner = ShmSegmentName.ownerPid(path.getFileName().toString());
            if (owner == pid || HostIdentity.isAlive(owner)) {
                continue;
            }
            try {
                if (Files.getLastModifiedTime(path, LinkOption.NOFOLLOW_LINKS).toInstant().isAfter(cutoff)) {
                    continue;
                }
            } catch (IOException e) {
                continue; // gone already
            }
            if (deleteQuietly(path)) {
                removed++;
                log.info(Subsys.SHM, "removed stale segment %s of dead process %d", path, owner);
            }
        }
        return removed;
    }

    /** The sparkccl segment files in the directory, whoever they belong to. */
    private List<Path> segmentFiles() {
        List<Path> out = new ArrayList<>();
        try (DirectoryStream<Path> files = Files.newDirectoryStream(directory, ShmSegmentName.PREFIX + "*")) {
            for (Path p : files) {
                if (ShmSegmentName.ownerPid(p.getFileName().toString()) >= 0) {
                    out.add(p);
                }
            }
        } catch (NoSuchFileException e) {
            return out;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot list " + directory + ": " + e.getMessage(), e);
        }
        return out;
    }

    /** Bytes of the regions this transport exposed or opened and that are not closed yet. */
    @Override
    public long outstandingBytes() {
        return outstanding.get();
    }

    /** Bytes of /dev/shm mapped by this JVM right now, over every transport (same-process views count once). */
    public static long mappedBytesInJvm() {
        return ShmSegment.mappedBytesInJvm();
    }

    /** Closes what is still open through this transport (a leak, so it warns). */
    @Override
    public void close() {
        for (ShmRegion region : new ArrayList<>(open)) {
            log.warn(Subsys.SHM, "closing %s, still open when its transport closed", region);
            region.close();
        }
    }

    private void track(ShmRegion region) {
        open.add(region);
        outstanding.addAndGet(region.segment.bytes);
    }

    private void closed(ShmRegion region) {
        if (open.remove(region)) {
            outstanding.addAndGet(-region.segment.bytes);
        }
    }

    private String tooSmallMessage(String label, long needed, long free) {
        return String.format(Locale.ROOT, "%s is too small: %s needs %d bytes (%s) of shared memory, %d bytes (%s)"
                        + " are free. Give %s more room: Docker `docker run --shm-size=<size>` (the default is 64 MB),"
                        + " docker-compose `shm_size:`, Kubernetes an emptyDir with `medium: Memory` mounted at"
                        + " /dev/shm; or make the buffers smaller (%s, %s)",
                directory, label, needed, human(needed), free, human(Math.max(free, 0)), directory,
                Params.BUFFSIZE.envName(), Params.NCHANNELS.envName());
    }

    private long usableSpace() {
        try {
            return Files.getFileStore(directory).getUsableSpace();
        } catch (IOException e) {
            throw new CclException("cannot read the free space of " + directory + ": " + e.getMessage(), e);
        }
    }

    private long usableSpaceOrMinusOne() {
        try {
            return freeSpace.getAsLong();
        } catch (RuntimeException e) {
            return -1;
        }
    }

    /** What a region of {@code bytes} takes in the directory: its header page and whole pages of region. */
    static long fileBytes(long bytes) {
        return ShmSegmentHeader.BYTES + roundUpToPage(bytes);
    }

    private static long roundUpToPage(long bytes) {
        return (bytes + PAGE_SIZE - 1) / PAGE_SIZE * PAGE_SIZE;
    }

    static String human(long bytes) {
        if (bytes < 1024) {
            return bytes + " B";
        }
        String[] units = {"KiB", "MiB", "GiB", "TiB"};
        double v = bytes;
        int u = -1;
        while (v >= 1024 && u < units.length - 1) {
            v /= 1024;
            u++;
        }
        return String.format(Locale.ROOT, "%.1f %s", v, units[u]);
    }

    private static boolean deleteQuietly(Path path) {
        try {
            return Files.deleteIfExists(path);
        } catch (IOException e) {
            return false;
        }
    }

    /** On a normal JVM exit, removes the names of segments still open, so nothing stays in /dev/shm. */
    private static void installShutdownHook() {
        if (SHUTDOWN_HOOK.compareAndSet(false, true)) {
            Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                for (ShmSegment segment : OWNED_IN_JVM.values()) {
                    try {
                        segment.removeName();
                    } catch (RuntimeException e) {
                        // Best effort while the JVM exits; the next run's stale scan gets the rest.
                    }
                }
            }, "sparkccl-shm-cleanup"));
        }
    }
}
