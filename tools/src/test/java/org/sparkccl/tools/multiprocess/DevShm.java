package org.sparkccl.tools.multiprocess;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.List;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.sparkccl.tools.launch.LaunchResult;

/** What a launch left in /dev/shm: segments are named {@code sparkccl-<pid>-<random>} after their creator. */
public final class DevShm {
    private DevShm() {
    }

    /** Names of the sparkccl segments created by the launch's ranks that still exist (other jobs' are ignored). */
    public static List<String> leftoversOf(LaunchResult result) {
        Path dir = Paths.get("/dev/shm");
        if (!Files.isDirectory(dir)) {
            return List.of();
        }
        try (Stream<Path> files = Files.list(dir)) {
            return files.map(p -> p.getFileName().toString())
                    .filter(name -> {
                        for (int r = 0; r < result.size(); r++) {
                            if (name.startsWith("sparkccl-" + result.pid(r) + "-")) {
                                return true;
                            }
                        }
                        return false;
                    })
                    .collect(Collectors.toList());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Deletes the named segments (of processes known dead), as a later process's stale scan would. */
    public static void remove(List<String> names) {
        for (String name : names) {
            try {
                Files.deleteIfExists(Paths.get("/dev/shm", name));
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    }
}
