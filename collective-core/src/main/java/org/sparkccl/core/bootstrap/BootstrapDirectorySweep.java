package org.sparkccl.core.bootstrap;

import java.io.IOException;
import java.nio.file.DirectoryNotEmptyException;
import java.nio.file.DirectoryStream;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Removes the rendezvous directories of {@link SharedDirectoryBootstrap} that ranks killed with
 * SIGKILL (or a JVM crash) left behind: a killed rank never closes, so the last-closer rule never
 * fires and the directory would stay in /dev/shm until the machine reboots.
 *
 * <p>Each process that opens a directory records itself in it once, as the empty file
 * {@code owner-<pid>-<start ms>-<pid namespace>} (ranks that are threads of one JVM share one record;
 * a directory used by several processes gets one per process). A directory is removed only when all
 * of these hold, so a directory a live rank uses is never removed:
 * <ul>
 *   <li>it was last modified more than {@link #GRACE} ago (a rank records itself right after it
 *       creates or joins the directory, and every round adds and deletes files in it, so a directory in
 *       use is either recent or has a live owner);</li>
 *   <li>every owner it records is dead: no process has that pid, or the one that has it started at
 *       another time (the pid was reused). An owner in another pid namespace (a container sharing
 *       /dev/shm) or one whose liveness this process cannot judge counts as alive;</li>
 *   <li>it holds only files the bootstrap writes (anything else is not ours to delete), and it is a
 *       directory, not a link.</li>
 * </ul>
 * A directory with no owner record at all (its creator died before recording itself, or a version
 * that wrote none) is removed on age alone. The sweep is best effort: whatever it cannot read or
 * delete it leaves, and sweepers that race over the same directory are harmless.
 */
final class BootstrapDirectorySweep {
    /**
     * How long a directory must be untouched before it may be removed: longer than a bootstrap wait's
     * default timeout (10 minutes), so it is a second guard beside the owner records.
     */
    static final Duration GRACE = Duration.ofMinutes(15);
    private static final String OWNER_PREFIX = "owner-";
    private static final Pattern OWNER = Pattern.compile("owner-(\\d+)-(\\d+)-(\\d+)");
    /** The files the bootstrap writes: round files, read and closed markers, owner records, temporaries. */
    private static final Pattern OURS = Pattern.compile(
            "round\\d+-(rank|read)\\d+|closed-rank\\d+|owner-\\d+-\\d+-\\d+|\\.tmp-.*");
    /** Start times of one process read twice may differ by rounding; a reused pid starts much later. */
    private static final long SAME_START_MS = 1000;
    private static final Path MY_NAMESPACE_LINK = Paths.get("/proc/self/ns/pid");
    private static final Pattern NAMESPACE_INODE = Pattern.compile("\\[(\\d+)]");

    private BootstrapDirectorySweep() {
    }

    /** Records this process as an owner of {@code directory} (once per process; threads share it). */
    static void recordThisProcess(Path directory) throws IOException {
        ProcessHandle self = ProcessHandle.current();
        record(directory, self.pid(), startMillis(self), pidNamespace(MY_NAMESPACE_LINK));
    }

    /** Records the owner {@code pid} (start time and pid namespace 0: unknown). */
    static void record(Path directory, long pid, long startMillis, long pidNamespace) throws IOException {
        try {
            Files.createFile(directory.resolve(OWNER_PREFIX + pid + "-" + startMillis + "-" + pidNamespace));
        } catch (FileAlreadyExistsException e) {
            // Another rank of this process recorded it first.
        }
    }

    /**
     * Removes the leftover directories under {@code root} whose names start with {@code prefix},
     * {@code keep} excepted; returns those it removed.
     */
    static List<Path> sweep(Path root, String prefix, Path keep) {
        List<Path> removed = new ArrayList<>();
        long myNamespace = pidNamespace(MY_NAMESPACE_LINK);
        Instant cutoff = Instant.now().minus(GRACE);
        try (DirectoryStream<Path> entries = Files.newDirectoryStream(root, prefix + "*")) {
            for (Path dir : entries) {
                if (!dir.equals(keep) && isLeftover(dir, cutoff, myNamespace) && removeWithFiles(dir)) {
                    removed.add(dir);
                }
            }
        } catch (IOException | RuntimeException e) {
            // Best effort: a root we cannot list has nothing we could remove.
        }
        return removed;
    }

    private static boolean isLeftover(Path dir, Instant cutoff, long myNamespace) throws IOException {
        if (!Files.isDirectory(dir, LinkOption.NOFOLLOW_LINKS)
                || Files.getLastModifiedTime(dir, LinkOption.NOFOLLOW_LINKS).toInstant().isAfter(cutoff)) {
            return false;
        }
        try (DirectoryStream<Path> files = Files.newDirectoryStream(dir)) {
            for (Path f : files) {
                String name = f.getFileName().toString();
                if (!OURS.matcher(name).matches() || !Files.isRegularFile(f, LinkOption.NOFOLLOW_LINKS)) {
                    return false;
                }
                Matcher owner = OWNER.matcher(name);
                if (owner.matches() && mayBeAlive(Long.parseLong(owner.group(1)), Long.parseLong(owner.group(2)),
                        Long.parseLong(owner.group(3)), myNamespace)) {
                    return false;
                }
            }
        }
        return true;
    }

    /** Whether the recorded owner may still run; true wherever this process cannot tell. */
    static boolean mayBeAlive(long pid, long startMillis, long namespace, long myNamespace) {
        if (namespace != myNamespace) {
            return true; // its pid means another process here, or we cannot compare
        }
        Optional<ProcessHandle> process = ProcessHandle.of(pid);
        if (process.isEmpty() || !process.get().isAlive()) {
            return false;
        }
        long start = startMillis(process.get());
        return startMillis == 0 || start == 0 || Math.abs(start - startMillis) <= SAME_START_MS;
    }

    /**
     * Deletes the directory's files, then the directory; false where it was gone already or a file
     * appeared meanwhile (another sweeper took it, or a peer's rename landed). Also the closing rank's
     * removal of its own group's directory (SharedDirectoryBootstrap).
     */
    static boolean removeWithFiles(Path dir) throws IOException {
        try (DirectoryStream<Path> files = Files.newDirectoryStream(dir)) {
            for (Path f : files) {
                Files.deleteIfExists(f);
            }
            Files.deleteIfExists(dir);
            return true;
        } catch (NoSuchFileException | DirectoryNotEmptyException e) {
            return false; // another sweeper took it, or a file landed: leave it for a later sweep
        }
    }

    private static long startMillis(ProcessHandle process) {
        return process.info().startInstant().map(Instant::toEpochMilli).orElse(0L);
    }

    /** The inode of a pid namespace link ({@code pid:[4026531836]}); 0 where there is none (not Linux). */
    static long pidNamespace(Path link) {
        try {
            Matcher m = NAMESPACE_INODE.matcher(Files.readSymbolicLink(link).toString());
            return m.find() ? Long.parseLong(m.group(1)) : 0;
        } catch (IOException | UnsupportedOperationException | SecurityException e) {
            return 0;
        }
    }
}
