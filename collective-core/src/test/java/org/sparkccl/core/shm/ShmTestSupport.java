package org.sparkccl.core.shm;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/** Small helpers shared by the SHM tests. */
final class ShmTestSupport {
    static final Path DEV_SHM = Path.of("/dev/shm");

    private ShmTestSupport() {
    }

    /** Names of the sparkccl segments of {@code pid} in /dev/shm. */
    static List<String> segmentsOf(long pid) throws IOException {
        try (Stream<Path> files = Files.list(DEV_SHM)) {
            return files.map(p -> p.getFileName().toString())
                    .filter(n -> n.startsWith(ShmSegmentName.PREFIX + pid + "-"))
                    .collect(Collectors.toList());
        }
    }
}
