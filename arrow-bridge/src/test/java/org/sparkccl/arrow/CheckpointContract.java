package org.sparkccl.arrow;

import org.sparkccl.core.memory.OffHeapMemorySource;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.ipc.ArrowFileReader;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.Schema;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * What a checkpoint must do on any Hadoop file system; subclasses say where: the local disk
 * ({@link LocalCheckpointTest}) and a real HDFS ({@link HdfsCheckpointTest}).
 */
abstract class CheckpointContract {
    static final TensorLayout LAYOUT = GradientBufferTest.MLP;

    protected BufferAllocator allocator;
    protected OffHeapMemorySource source;

    /** A fresh, empty directory on the file system under test. */
    abstract Path directory() throws IOException;

    abstract Configuration conf();

    @BeforeEach
    void setUpMemory() {
        allocator = new RootAllocator();
        source = new OffHeapMemorySource();
    }

    @AfterEach
    void noLeaks() {
        assertEquals(0, allocator.getAllocatedMemory(), "allocator has memory outstanding");
        assertEquals(0, source.outstandingBytes(), "host memory source has memory outstanding");
        allocator.close();
    }

    GradientBuffer random(String name, ElementType type, long seed) {
        GradientBuffer g = GradientBuffer.allocate(allocator, name, LAYOUT, type, source);
        Random rnd = new Random(seed);
        double[] v = new double[(int) g.elementCount()];
        for (int i = 0; i < v.length; i++) {
            v[i] = rnd.nextGaussian();
        }
        g.copyFrom(v);
        return g;
    }

    static void assertSameValues(GradientBuffer expected, GradientBuffer actual) {
        assertEquals(expected.layout(), actual.layout());
        assertEquals(expected.elementType(), actual.elementType());
        assertArrayEquals(expected.toDoubleArray(), actual.toDoubleArray(), "values of " + expected.name());
    }

    @Test
    void roundTripsWeightsStateStepAndMetadata() throws IOException {
        Path dir = directory();
        try (GradientBuffer weights = random("w", ElementType.FLOAT32, 1);
             GradientBuffer m = weights.allocateLike("m");
             GradientBuffer v = weights.allocateLike("v")) {
            Random rnd = new Random(2);
            for (long i = 0; i < weights.elementCount(); i++) {
                m.setDouble(i, rnd.nextGaussian());
                v.setDouble(i, rnd.nextDouble());
            }
            Map<String, String> meta = Map.of("model", "mlp", "lr", "0.01", "optimizer", "adam");
            Path file = Checkpoint.write(dir, conf(), 42, weights, List.of(m, v), meta);
            assertEquals(Checkpoint.pathFor(dir, 42).getName(), file.getName());
            assertEquals(42, Checkpoint.stepOf(file));

            try (Checkpoint c = Checkpoint.read(file, conf(), allocator, source)) {
                assertEquals(42, c.step());
                assertEquals(meta, c.metadata());
                assertEquals(Checkpoint.WEIGHTS_COLUMN, c.weights().name());
                assertSameValues(weights, c.weights());
                assertEquals(2, c.optimizerSlots().size());
                assertEquals("m", c.optimizerSlots().get(0).name());
                assertEquals("v", c.optimizerSlots().get(1).name());
                assertSameValues(m, c.optimizerSlots().get(0));
                assertSameValues(v, c.optimizerSlots().get(1));
            }
            assertNoTemporaryFiles(dir);
        }
    }

    /** The columns and schema keys that checkpoints already on disk were written with, so they still load. */
    @Test
    void theFileLayoutIsTheDocumentedOne() throws IOException {
        Path dir = directory();
        try (GradientBuffer weights = random("w", ElementType.FLOAT32, 6);
             GradientBuffer m = weights.allocateLike("m");
             GradientBuffer v = weights.allocateLike("v")) {
            Path file = Checkpoint.write(dir, conf(), 12, weights, List.of(m, v), Map.of("model", "mlp"));
            FileSystem fs = file.getFileSystem(conf());
            try (FSDataInputStream in = fs.open(file);
                 ArrowFileReader reader = new ArrowFileReader(
                         new HadoopReadChannel(in, fs.getFileStatus(file).getLen()), allocator)) {
                Schema schema = reader.getVectorSchemaRoot().getSchema();
                assertEquals(List.of("weights", "state.m", "state.v"),
                        schema.getFields().stream().map(Field::getName).toList());
                assertEquals(Map.of("sparkccl.checkpoint_version", "1", "sparkccl.step", "12",
                        "sparkccl.meta.model", "mlp"), schema.getCustomMetadata());
                assertEquals(1, reader.getRecordBlocks().size());
            }
        }
    }

    @Test
    void aSlotNamedTwiceIsRefused() throws IOException {
        Path dir = directory();
        try (GradientBuffer weights = random("w", ElementType.FLOAT32, 7);
             GradientBuffer a = weights.allocateLike("m");
             GradientBuffer b = weights.allocateLike("m")) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> Checkpoint.write(dir, conf(), 1, weights, List.of(a, b), Map.of()));
            assertTrue(e.getMessage().contains("'m' appears twice"), e.getMessage());
        }
    }

    @Test
    void everyElementTypeRoundTripsBitForBit() throws IOException {
        Path dir = directory();
        long step = 0;
        for (ElementType type : ElementType.values()) {
            try (GradientBuffer weights = random("w", type, 10 + type.ordinal());
                 GradientBuffer momentum = random("momentum",
                         type == ElementType.FLOAT64 ? ElementType.FLOAT32 : ElementType.FLOAT64, 20 + type.ordinal())) {
                Path file = Checkpoint.write(dir, conf(), ++step, weights, List.of(momentum), Map.of());
                try (Checkpoint c = Checkpoint.read(file, conf(), allocator, source)) {
                    assertSameValues(weights, c.weights());
                    assertSameValues(momentum, c.optimizerSlots().get(0));
                    assertTrue(c.metadata().isEmpty());
                }
            }
        }
    }

    @Test
    void latestFindsTheHighestStepAndResumesFromIt() throws IOException {
        Path dir = directory();
        assertFalse(Checkpoint.latest(dir, conf()).isPresent(), "an empty directory has no checkpoint");
        assertFalse(Checkpoint.latest(new Path(dir, "missing"), conf()).isPresent(),
                "a missing directory has no checkpoint");
        List<GradientBuffer> written = new ArrayList<>();
        try {
            for (long step : new long[] {5, 1_000_000_000_000L, 40, 12}) {
                GradientBuffer w = random("w", ElementType.FLOAT32, step);
                written.add(w);
                Checkpoint.write(dir, conf(), step, w, List.of(), Map.of("step", Long.toString(step)));
            }
            // Leftovers of an interrupted write and unrelated files are not checkpoints.
            FileSystem fs = dir.getFileSystem(conf());
            touch(fs, new Path(dir, "_tmp.checkpoint-999999999999999.arrow.0000"));
            touch(fs, new Path(dir, "checkpoint-latest.arrow"));
            touch(fs, new Path(dir, "notes.txt"));

            assertEquals(1_000_000_000_000L, Checkpoint.stepOf(Checkpoint.latest(dir, conf()).orElseThrow()));
            List<Long> steps = new ArrayList<>();
            for (Path p : Checkpoint.list(dir, conf())) {
                steps.add(Checkpoint.stepOf(p));
            }
            assertEquals(List.of(5L, 12L, 40L, 1_000_000_000_000L), steps);

            assertEquals(2, Checkpoint.prune(dir, conf(), 2));
            try (Checkpoint c = Checkpoint.readLatest(dir, conf(), allocator).orElseThrow()) {
                assertEquals(1_000_000_000_000L, c.step());
                assertEquals("1000000000000", c.metadata().get("step"));
                assertSameValues(written.get(1), c.weights());
                assertTrue(c.optimizerSlots().isEmpty());
            }
            fs.delete(Checkpoint.pathFor(dir, 1_000_000_000_000L), false);
            assertEquals(40, Checkpoint.stepOf(Checkpoint.latest(dir, conf()).orElseThrow()));
        } finally {
            written.forEach(GradientBuffer::close);
        }
    }

    @Test
    void copyIntoRestoresLiveBuffersAndRefusesAnotherOptimizer() throws IOException {
        Path dir = directory();
        try (GradientBuffer weights = random("w", ElementType.FLOAT32, 3);
             GradientBuffer momentum = random("momentum", ElementType.FLOAT32, 4)) {
            Checkpoint.write(dir, conf(), 7, weights, List.of(momentum), Map.of());

            try (GradientBuffer live = GradientBuffer.allocate(allocator, "w", LAYOUT, ElementType.FLOAT32, source);
                 GradientBuffer liveMomentum = live.allocateLike("momentum");
                 GradientBuffer m = live.allocateLike("m");
                 GradientBuffer v = live.allocateLike("v");
                 Checkpoint c = Checkpoint.readLatest(dir, conf(), allocator).orElseThrow()) {
                c.copyInto(live, List.of(liveMomentum));
                assertSameValues(weights, live);
                assertSameValues(momentum, liveMomentum);
                IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                        () -> c.copyInto(live, List.of(m, v)));
                assertTrue(e.getMessage().contains("another optimizer"), e.getMessage());
            }
        }
    }

    @Test
    void rewritingAStepReplacesIt() throws IOException {
        Path dir = directory();
        try (GradientBuffer first = random("w", ElementType.FLOAT32, 4);
             GradientBuffer second = random("w", ElementType.FLOAT32, 5)) {
            Checkpoint.write(dir, conf(), 3, first, List.of(), Map.of());
            Checkpoint.write(dir, conf(), 3, second, List.of(), Map.of());
            assertEquals(1, Checkpoint.list(dir, conf()).size());
            try (Checkpoint c = Checkpoint.readLatest(dir, conf(), allocator).orElseThrow()) {
                assertSameValues(second, c.weights());
            }
        }
    }

    @Test
    void aFileThatIsNotACheckpointIsRefusedWithoutLeaking() throws IOException {
        Path dir = directory();
        FileSystem fs = dir.getFileSystem(conf());
        Path bogus = Checkpoint.pathFor(dir, 9);
        try (FSDataOutputStream out = fs.create(bogus)) {
            out.write("this is not an Arrow file, but long enough to have a footer".getBytes());
        }
        assertThrows(Exception.class, () -> Checkpoint.read(bogus, conf(), allocator, source));
    }

    static void touch(FileSystem fs, Path p) throws IOException {
        try (FSDataOutputStream out = fs.create(p)) {
            out.write(1);
        }
    }

    void assertNoTemporaryFiles(Path dir) throws IOException {
        for (FileStatus s : dir.getFileSystem(conf()).listStatus(dir)) {
            assertFalse(s.getPath().getName().startsWith("_tmp"), "temporary file left behind: " + s.getPath());
        }
    }
}
