package org.sparkccl.arrow;

import java.io.IOException;
import java.nio.file.Files;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.junit.jupiter.api.io.TempDir;

/** Checkpoints on the local disk, through Hadoop's {@code file://} file system. */
class LocalCheckpointTest extends CheckpointContract {
    private static final Configuration CONF = new Configuration();

    @TempDir
    java.nio.file.Path tmp;

    @Override
    Path directory() throws IOException {
        return new Path(Files.createTempDirectory(tmp, "ckpt").toUri());
    }

    @Override
    Configuration conf() {
        return CONF;
    }
}
