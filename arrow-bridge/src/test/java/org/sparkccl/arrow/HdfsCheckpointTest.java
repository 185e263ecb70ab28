package org.sparkccl.arrow;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.IOException;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.io.TempDir;

/**
 * Checkpoints on a real HDFS: one MiniDFSCluster (a NameNode and a DataNode on 127.0.0.1) started
 * once for the class.
 */
class HdfsCheckpointTest extends CheckpointContract {
    private static MiniDFSCluster cluster;
    private static Configuration conf;
    @TempDir
    static java.nio.file.Path baseDir;
    private static final AtomicInteger DIRS = new AtomicInteger();

    @BeforeAll
    static void startHdfs() throws IOException {
        Configuration c = new Configuration();
        c.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, baseDir.toAbsolutePath().toString());
        c.set("dfs.namenode.rpc-bind-host", "127.0.0.1");
        c.set("dfs.namenode.http-bind-host", "127.0.0.1");
        c.set("dfs.datanode.address", "127.0.0.1:0");
        c.set("dfs.datanode.http.address", "127.0.0.1:0");
        c.set("dfs.datanode.ipc.address", "127.0.0.1:0");
        c.set("dfs.namenode.http-address", "127.0.0.1:0");
        cluster = new MiniDFSCluster.Builder(c).numDataNodes(1).build();
        cluster.waitActive();
        conf = cluster.getConfiguration(0);
    }

    @AfterAll
    static void stopHdfs() {
        if (cluster != null) {
            cluster.shutdown(true);
        }
    }

    @Override
    Path directory() throws IOException {
        Path dir = new Path(cluster.getURI().toString() + "/checkpoints/" + DIRS.incrementAndGet());
        assertEquals("hdfs", dir.toUri().getScheme());
        return dir;
    }

    @Override
    Configuration conf() {
        return conf;
    }
}
