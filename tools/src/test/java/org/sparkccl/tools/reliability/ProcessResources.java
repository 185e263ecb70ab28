package org.sparkccl.tools.reliability;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/** What this process holds from the kernel, read from /proc: open descriptors, mappings, threads. */
final class ProcessResources {
    final long fds;
    final long mappings;
    final long threads;
    /** What each descriptor points to (a file, socket:[..], anon_inode:..): names what a leak leaks. */
    final List<String> fdTargets;

    private ProcessResources(List<String> fdTargets, long mappings, long threads) {
        this.fds = fdTargets.size();
        this.fdTargets = fdTargets;
        this.mappings = mappings;
        this.threads = threads;
    }

    static ProcessResources now() {
        try (Stream<Path> fds = Files.list(Paths.get("/proc/self/fd"));
             Stream<String> maps = Files.lines(Paths.get("/proc/self/maps"));
             Stream<Path> tasks = Files.list(Paths.get("/proc/self/task"))) {
            return new ProcessResources(fds.map(ProcessResources::target).collect(Collectors.toList()), maps.count(),
                    tasks.count());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static String target(Path fd) {
        try {
            return String.valueOf(Files.readSymbolicLink(fd));
        } catch (IOException e) {
            return "closed"; // the listing's own descriptor, gone by now
        }
    }

    /** Descriptors open now that {@code earlier} did not have, by target. */
    List<String> newSince(ProcessResources earlier) {
        List<String> added = new ArrayList<>(fdTargets);
        for (String t : earlier.fdTargets) {
            added.remove(t);
        }
        return added;
    }

    @Override
    public String toString() {
        return "fds " + fds + " mappings " + mappings + " threads " + threads;
    }
}
