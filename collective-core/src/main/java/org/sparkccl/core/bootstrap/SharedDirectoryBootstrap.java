package org.sparkccl.core.bootstrap;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.function.IntFunction;
import java.util.regex.Pattern;
import org.sparkccl.core.Bootstrap;
import org.sparkccl.core.CclException;
import org.sparkccl.core.CclTimeoutException;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.wait.SpinYieldPark;
import org.sparkccl.core.wire.WireFormat;
import org.sparkccl.core.wire.WireFormatException;

/**
 * A {@link Bootstrap} for ranks (processes or threads) of one machine whose rendezvous is a
 * directory, by default in /dev/shm: {@code sparkccl-bootstrap-<key>}. Spark's
 * {@code BarrierTaskContext.allGather} costs about a second per round; this costs a few file
 * operations, so a barrier stage whose tasks all run on one host builds its communicator in
 * milliseconds.
 *
 * <p>Round {@code r} (every {@link #allGather} or {@link #barrier} is one round):
 * <ol>
 *   <li>each rank writes its bytes to a temporary file and renames it, atomically, to
 *       {@code round<r>-rank<k>}: a file that exists is complete, so no reader ever sees half of one;</li>
 *   <li>each rank waits until all {@code size} files exist (spin, yield, then park: the project's one
 *       idle strategy, {@link SpinYieldPark}), reads them, and writes the marker {@code round<r>-read<k>};</li>
 *   <li>the rank that finds every marker present after writing its own deletes the round's files:
 *       by then every rank has read them.</li>
 * </ol>
 * {@link #close} writes {@code closed-rank<k>}; the rank that then finds every rank closed removes
 * the directory. Deletions tolerate a peer that deletes the same file at the same moment.
 *
 * <p>The key must be unique to one group of ranks and one attempt of it (Spark: app id, stage id and
 * stage attempt number). A directory left behind by an earlier attempt whose rank died is then never
 * read by a later one: the attempt number makes the later attempt's directory another one. Such a
 * leftover (its ranks killed, so none closed) holds a few small files; rank 0 of every group that
 * opens removes those it finds under the same root ({@link BootstrapDirectorySweep}): each process
 * records its pid (with its start time and pid namespace) as the file {@code owner-<pid>-<start>-<ns>}
 * when it opens, and a directory goes only once every recorded owner is dead and it has been
 * untouched for {@link BootstrapDirectorySweep#GRACE} (15 minutes). A killed attempt's ranks that
 * still run keep theirs: their process is alive.
 *
 * <p>Every file carries its kind (allGather or barrier) and round number, so ranks that make
 * different calls fail, naming both, instead of handing each other the wrong bytes. A wait ends with
 * an error naming the ranks whose files are missing on timeout, on interruption and when
 * {@code cancelled} turns true (Spark task kill).
 *
 * <p>Not thread safe: one thread per rank calls it ({@link #close} excepted, which may come from
 * any thread once the rank's calls are over).
 */
public final class SharedDirectoryBootstrap implements Bootstrap {
    /** Every rendezvous directory starts with this, followed by the key. */
    public static final String DIRECTORY_PREFIX = "sparkccl-bootstrap-";
    /** Bytes 'S','C','B','D' first in every round file. */
    static final WireFormat FORMAT = WireFormat.sealed("shared-directory bootstrap file", 0x53434244, 1);
    private static final Pattern KEY = Pattern.compile("[A-Za-z0-9._-]+");
    /** Few spins: each poll is a stat() per missing file, and peers usually arrive within milliseconds. */
    private static final int SPINS = 100;
    private static final long MIN_PARK_NANOS = TimeUnit.MICROSECONDS.toNanos(10);
    private static final long MAX_PARK_NANOS = TimeUnit.MILLISECONDS.toNanos(1);

    private final Path directory;
    private final int rank;
    private final int size;
    private final long timeoutMs;
    private final BooleanSupplier cancelled;
    private int round;
    private boolean closed;

    private SharedDirectoryBootstrap(Path directory, int rank, int size, long timeoutMs, BooleanSupplier cancelled) {
        this.directory = directory;
        this.rank = rank;
        this.size = size;
        this.timeoutMs = timeoutMs;
        this.cancelled = cancelled;
    }

    /**
     * Joins the group that meets in {@code root/sparkccl-bootstrap-<key>} (created if no peer made it
     * yet, mode 0700 where the file system has POSIX permissions). Returns at once: the ranks meet in
     * the first round. Each wait gives up after {@code timeoutMs}; {@code cancelled} is polled while
     * waiting. Records this process as an owner of the directory; rank 0 also removes the leftovers
     * of killed groups under {@code root} (see the class comment).
     */
    public static SharedDirectoryBootstrap open(Path root, String key, int rank, int size, long timeoutMs,
                                                BooleanSupplier cancelled) {
        if (size < 1 || rank < 0 || rank >= size) {
            throw new IllegalArgumentException("rank " + rank + " of " + size + " is not a valid place in a group");
        }
        if (key == null || !KEY.matcher(key).matches()) {
            throw new IllegalArgumentException("bootstrap key '" + key + "' must be letters, digits, '.', '_' or '-'"
                    + " only: it names a directory");
        }
        if (timeoutMs < 1) {
            throw new IllegalArgumentException("the bootstrap timeout must be 1 ms or more, not " + timeoutMs);
        }
        Path directory = root.resolve(DIRECTORY_PREFIX + key);
        try {
            Files.createDirectories(root);
            try {
                if (Files.getFileStore(root).supportsFileAttributeView("posix")) {
                    Files.createDirectory(directory, PosixFilePermissions.asFileAttribute(
                            PosixFilePermissions.fromString("rwx------")));
                } else {
                    Files.createDirectory(directory);
                }
            } catch (FileAlreadyExistsException e) {
                // A peer made it first: the normal case for every rank but one.
            }
            BootstrapDirectorySweep.recordThisProcess(directory);
        } catch (IOException e) {
            throw new CclException("rank " + rank + " of " + size + ": cannot create the bootstrap directory "
                    + directory + ": " + e + "; is " + root + " writable and not full?", e);
        }
        if (rank == 0) {
            // One rank per group is enough to keep the root clean; the others go straight to the first round.
            BootstrapDirectorySweep.sweep(root, DIRECTORY_PREFIX, directory);
        }
        return new SharedDirectoryBootstrap(directory, rank, size, timeoutMs, Objects.requireNonNull(cancelled,
                "cancelled"));
    }

    /** /dev/shm where the machine has it (memory, and shared by every process of it), else java.io.tmpdir. */
    public static Path defaultRoot() {
        Path shm = Paths.get("/dev/shm");
        return Files.isDirectory(shm) && Files.isWritable(shm) ? shm : Paths.get(System.getProperty("java.io.tmpdir"));
    }

    /** Where the ranks meet. */
    public Path directory() {
        return directory;
    }

    @Override
    public int rank() {
        return rank;
    }

    @Override
    public int size() {
        return size;
    }

    @Override
    public byte[][] allGather(byte[] mine) {
        return call(BootstrapCall.ALL_GATHER, Objects.requireNonNull(mine, "mine"));
    }

    @Override
    public void barrier() {
        call(BootstrapCall.BARRIER, new byte[0]);
    }

    /** Says this rank is done; the last rank to close removes the directory. Idempotent. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        try {
            writeAtomically(closedMarker(rank), new byte[0]);
            if (allExist(this::closedMarker)) {
                removeDirectory();
            }
        } catch (IOException | UncheckedIOException e) {
            // Best effort: the files are small, and a peer that closes later may still remove them.
        }
    }

    private byte[][] call(byte kind, byte[] mine) {
        if (closed) {
            throw new IllegalStateException(who() + ": the bootstrap is closed");
        }
        int r = round++;
        ByteBuffer body = ByteBuffer.allocate(5 + mine.length);
        body.put(kind).putInt(r).put(mine);
        try {
            writeAtomically(roundFile(r, rank), FORMAT.seal(body.array()));
        } catch (IOException e) {
            throw new CclException(who() + ": cannot write " + roundFile(r, rank) + " for " + describe(kind, r) + ": "
                    + e + "; is " + directory.getParent() + " full?", e);
        }
        awaitAll(kind, r);
        byte[][] all = new byte[size][];
        for (int k = 0; k < size; k++) {
            all[k] = k == rank ? mine.clone() : read(kind, r, k);
        }
        finishRound(r);
        return all;
    }

    /** Waits until every rank's file of round {@code r} exists. */
    private void awaitAll(byte kind, int r) {
        SpinYieldPark idle = new SpinYieldPark(SPINS, SpinYieldPark.DEFAULT_YIELD_NANOS, MIN_PARK_NANOS, MAX_PARK_NANOS);
        long start = System.nanoTime();
        long timeoutNs = TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        List<Integer> missing = new ArrayList<>();
        for (int k = 0; k < size; k++) {
            if (k != rank) {
                missing.add(k);
            }
        }
        while (true) {
            missing.removeIf(k -> Files.exists(roundFile(r, k)));
            if (missing.isEmpty()) {
                return;
            }
            boolean interrupted = Thread.currentThread().isInterrupted();
            if (interrupted || cancelled.getAsBoolean()) {
                throw new CclException(who() + ": " + describe(kind, r) + (interrupted ? " interrupted" : " cancelled"
                        + " (task killed)") + " while waiting for ranks " + missing + " in " + directory);
            }
            if (System.nanoTime() - start > timeoutNs) {
                throw new CclTimeoutException(who() + ": " + describe(kind, r) + " timed out after " + timeoutMs
                        + " ms: ranks " + missing + " wrote no " + roundFile(r, missing.get(0)).getFileName()
                        + "-like file in " + directory + ". They may be slow or stuck (raise "
                        + Params.TIMEOUT_MS.envName() + ", spark.sparkccl.timeoutMs in Spark), or not share this"
                        + " directory: ranks on other machines or in containers with a /dev/shm of their own cannot"
                        + " meet here (in Spark, set spark.sparkccl.bootstrap=spark)");
            }
            idle.idle();
        }
    }

    private byte[] read(byte kind, int r, int k) {
        Path file = roundFile(r, k);
        String from = "rank " + k + "'s file " + file + " (read by rank " + rank + ")";
        byte[] sealed;
        try {
            sealed = Files.readAllBytes(file);
        } catch (IOException e) {
            throw new CclException(who() + ": cannot read " + file + " in " + describe(kind, r) + ": " + e
                    + "; did something else delete files in " + directory + "?", e);
        }
        try {
            ByteBuffer in = FORMAT.open(sealed, from);
            if (in.remaining() < 5) {
                throw FORMAT.malformed(from, "its body has " + in.remaining() + " bytes, too few for its kind and round");
            }
            byte theirKind = in.get();
            int theirRound = in.getInt();
            if (theirKind != kind || theirRound != r) {
                throw new CclException(who() + ": bootstrap calls differ across ranks: rank " + rank + " is in "
                        + describe(kind, r) + " but rank " + k + " is in " + describe(theirKind, theirRound)
                        + "; every rank must make the same bootstrap calls in the same order");
            }
            byte[] theirs = new byte[in.remaining()];
            in.get(theirs);
            return theirs;
        } catch (WireFormatException e) {
            throw new CclException(who() + ": " + e.getMessage(), e);
        }
    }

    /** Marks round {@code r} read by this rank; the rank that completes the markers deletes the round. */
    private void finishRound(int r) {
        try {
            writeAtomically(readMarker(r, rank), new byte[0]);
            if (allExist(k -> readMarker(r, k))) {
                for (int k = 0; k < size; k++) {
                    Files.deleteIfExists(roundFile(r, k));
                }
                for (int k = 0; k < size; k++) {
                    Files.deleteIfExists(readMarker(r, k));
                }
            }
        } catch (IOException e) {
            throw new CclException(who() + ": cannot mark round " + r + " read in " + directory + ": " + e, e);
        }
    }

    private boolean allExist(IntFunction<Path> file) {
        for (int k = 0; k < size; k++) {
            if (!Files.exists(file.apply(k))) {
                return false;
            }
        }
        return true;
    }

    /**
     * Every peer has closed: nothing reads here any more. A peer doing the same at once is harmless, and
     * a peer's rename that lands while we list leaves the directory to that peer's own close.
     */
    private void removeDirectory() throws IOException {
        BootstrapDirectorySweep.removeWithFiles(directory);
    }

    /** Writes {@code bytes} to a temporary file and renames it to {@code target}: readers see all of it or nothing. */
    private void writeAtomically(Path target, byte[] bytes) throws IOException {
        Path temp = directory.resolve(".tmp-" + target.getFileName());
        Files.write(temp, bytes);
        Files.move(temp, target, StandardCopyOption.ATOMIC_MOVE);
    }

    private Path roundFile(int r, int k) {
        return directory.resolve("round" + r + "-rank" + k);
    }

    private Path readMarker(int r, int k) {
        return directory.resolve("round" + r + "-read" + k);
    }

    private Path closedMarker(int k) {
        return directory.resolve("closed-rank" + k);
    }

    private String who() {
        return "SharedDirectoryBootstrap rank " + rank + " of " + size;
    }

    /** Round {@code r} (from 0) is call number r + 1, as TcpBootstrap counts its calls. */
    private static String describe(byte kind, int r) {
        return BootstrapCall.describe(kind, r + 1);
    }

    @Override
    public String toString() {
        return "shared-directory bootstrap in " + directory;
    }
}
