package org.sparkccl.arrow;

import org.sparkccl.core.memory.HostMemorySource;
import org.sparkccl.core.memory.HostMemorySources;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.channels.Channels;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.UUID;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.agrona.CloseHelper;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.util.MemoryUtil;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowFileReader;
import org.apache.arrow.vector.ipc.ArrowFileWriter;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.FieldType;
import org.apache.arrow.vector.types.pojo.Schema;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.StreamCapabilities;

/**
 * A training checkpoint: the model's weights, the optimizer's state (its named slots, each a
 * {@link GradientBuffer} of the weights' layout named after the slot), the step number and a small
 * string map, as one Arrow IPC file written and read through Hadoop's {@link FileSystem} (so
 * {@code file://}, {@code hdfs://} and anything else Hadoop is configured for).
 *
 * <p>File layout: {@code <dir>/checkpoint-<step, 12 digits>.arrow}, one record batch whose columns
 * are {@code weights} and {@code state.<slot>} for each optimizer slot, each column a
 * {@link GradientBuffer}'s field (layout and element type in its metadata). Schema metadata holds
 * {@code sparkccl.checkpoint_version}, {@code sparkccl.step} and the user's map as
 * {@code sparkccl.meta.<key>}. Any Arrow reader (pyarrow, for one) can open the file.
 *
 * <p>Writes are atomic where the file system's rename is (HDFS, local disks): the file is written
 * under a hidden temporary name in the same directory, synced, and renamed into place, so
 * {@link #latest} never sees half a checkpoint. Call {@link #write} on one rank only (rank 0): every
 * rank holds the same weights after an all-reduce step.
 *
 * <p>A Checkpoint read back owns its buffers; {@link #copyInto} live buffers, then close it.
 */
public final class Checkpoint implements AutoCloseable {
    public static final String WEIGHTS_COLUMN = "weights";
    public static final String STATE_COLUMN_PREFIX = "state.";
    public static final String KEY_VERSION = "sparkccl.checkpoint_version";
    public static final String KEY_STEP = "sparkccl.step";
    public static final String KEY_META_PREFIX = "sparkccl.meta.";
    private static final String VERSION = "1";
    private static final Pattern FILE_NAME = Pattern.compile("checkpoint-(\\d{12,})\\.arrow");

    private final Path path;
    private final long step;
    private final Map<String, String> metadata;
    private final GradientBuffer weights;
    private final List<GradientBuffer> optimizerSlots;

    private Checkpoint(Path path, long step, Map<String, String> metadata, GradientBuffer weights,
            List<GradientBuffer> optimizerSlots) {
        this.path = path;
        this.step = step;
        this.metadata = Collections.unmodifiableMap(metadata);
        this.weights = weights;
        this.optimizerSlots = List.copyOf(optimizerSlots);
    }

    /** The file name of step {@code step}'s checkpoint in {@code dir}. */
    public static Path pathFor(Path dir, long step) {
        if (step < 0) {
            throw new IllegalArgumentException("checkpoint step must be >= 0, got " + step);
        }
        return new Path(dir, String.format("checkpoint-%012d.arrow", step));
    }

    /** The step encoded in a checkpoint file's name, or -1 when the name is not a checkpoint's. */
    public static long stepOf(Path file) {
        Matcher m = FILE_NAME.matcher(file.getName());
        return m.matches() ? Long.parseLong(m.group(1)) : -1;
    }

    // ---- Writing. ---------------------------------------------------------------------------

    /**
     * Writes {@code weights} and the optimizer's {@code slots} (the weights' layout, each named after
     * its slot; none for plain SGD) as step {@code step}'s checkpoint in {@code dir}, creating the
     * directory if needed, and returns the file's path. An existing checkpoint of the same step is
     * replaced.
     */
    public static Path write(Path dir, Configuration conf, long step, GradientBuffer weights,
            List<GradientBuffer> slots, Map<String, String> metadata) throws IOException {
        Path target = pathFor(dir, step);
        FileSystem fs = dir.getFileSystem(conf);
        Schema schema = schema(step, weights, slots, metadata);
        List<FieldVector> vectors = new ArrayList<>();
        vectors.add(weights.vector());
        for (GradientBuffer slot : slots) {
            vectors.add(slot.vector());
        }
        // A root over the buffers' own vectors: nothing is copied, and it must not be closed (it would close them).
        VectorSchemaRoot root = new VectorSchemaRoot(schema, vectors, (int) weights.elementCount());

        fs.mkdirs(dir);
        // Hidden ('_' prefix, as Hadoop's own jobs do) and unique, in the same directory so rename stays atomic.
        Path temporary = new Path(dir, "_tmp." + target.getName() + "." + UUID.randomUUID());
        boolean renamed = false;
        try {
            try (FSDataOutputStream out = fs.create(temporary, false);
                 ArrowFileWriter writer = new ArrowFileWriter(root, null, Channels.newChannel(out))) {
                writer.start();
                writer.writeBatch();
                writer.end();
                if (out.hasCapability(StreamCapabilities.HSYNC)) {
                    out.hsync();
                }
            }
            if (fs.exists(target) && !fs.delete(target, false)) {
                throw new IOException("cannot replace existing checkpoint " + target + ": delete failed");
            }
            if (!fs.rename(temporary, target)) {
                throw new IOException("cannot rename " + temporary + " to " + target
                        + " (does the target exist, or is the directory read-only?)");
            }
            renamed = true;
            return target;
        } finally {
            if (!renamed) {
                try {
                    fs.delete(temporary, false);
                } catch (IOException e) {
                    // The write already failed; the hidden temporary file is ignored by latest().
                }
            }
        }
    }

    private static Schema schema(long step, GradientBuffer weights, List<GradientBuffer> slots,
            Map<String, String> metadata) {
        List<Field> fields = new ArrayList<>();
        fields.add(renamed(weights, WEIGHTS_COLUMN));
        Set<String> names = new HashSet<>();
        for (GradientBuffer slot : slots) {
            if (!names.add(slot.name())) {
                throw new IllegalArgumentException("optimizer slot '" + slot.name() + "' appears twice");
            }
            if (!slot.layout().equals(weights.layout())) {
                throw new IllegalArgumentException("optimizer slot '" + slot.name() + "' has another layout than the "
                        + "weights (" + slot.layout() + " vs " + weights.layout() + ")");
            }
            fields.add(renamed(slot, STATE_COLUMN_PREFIX + slot.name()));
        }
        Map<String, String> schemaMetadata = new LinkedHashMap<>();
        schemaMetadata.put(KEY_VERSION, VERSION);
        schemaMetadata.put(KEY_STEP, Long.toString(step));
        for (Map.Entry<String, String> e : metadata.entrySet()) {
            schemaMetadata.put(KEY_META_PREFIX + e.getKey(), e.getValue());
        }
        return new Schema(fields, schemaMetadata);
    }

    private static Field renamed(GradientBuffer buffer, String name) {
        Field f = buffer.field();
        return new Field(name, new FieldType(false, f.getType(), null, f.getMetadata()), null);
    }

    // ---- Finding. ---------------------------------------------------------------------------

    /** Checkpoint files in {@code dir}, oldest step first; empty when the directory does not exist. */
    public static List<Path> list(Path dir, Configuration conf) throws IOException {
        FileSystem fs = dir.getFileSystem(conf);
        FileStatus[] statuses;
        try {
            statuses = fs.listStatus(dir);
        } catch (FileNotFoundException e) {
            return List.of();
        }
        List<Path> files = new ArrayList<>();
        for (FileStatus s : statuses) {
            if (s.isFile() && stepOf(s.getPath()) >= 0) {
                files.add(s.getPath());
            }
        }
        files.sort(Comparator.comparingLong(Checkpoint::stepOf));
        return files;
    }

    /** The checkpoint of the highest step in {@code dir}: where to resume. */
    public static Optional<Path> latest(Path dir, Configuration conf) throws IOException {
        List<Path> files = list(dir, conf);
        return files.isEmpty() ? Optional.empty() : Optional.of(files.get(files.size() - 1));
    }

    /** Deletes all but the {@code keep} newest checkpoints in {@code dir}; returns how many it deleted. */
    public static int prune(Path dir, Configuration conf, int keep) throws IOException {
        if (keep < 1) {
            throw new IllegalArgumentException("keep at least one checkpoint, got " + keep);
        }
        FileSystem fs = dir.getFileSystem(conf);
        List<Path> files = list(dir, conf);
        int deleted = 0;
        for (int i = 0; i < files.size() - keep; i++) {
            if (fs.delete(files.get(i), false)) {
                deleted++;
            }
        }
        return deleted;
    }

    // ---- Reading. ---------------------------------------------------------------------------

    /** The newest checkpoint in {@code dir}, read into buffers from {@code allocator}; empty if there is none. */
    public static Optional<Checkpoint> readLatest(Path dir, Configuration conf, BufferAllocator allocator)
            throws IOException {
        Optional<Path> latest = latest(dir, conf);
        return latest.isPresent() ? Optional.of(read(latest.get(), conf, allocator)) : Optional.empty();
    }

    public static Checkpoint read(Path file, Configuration conf, BufferAllocator allocator) throws IOException {
        return read(file, conf, allocator, HostMemorySources.preferred());
    }

    /** Reads a checkpoint into new buffers from {@code allocator} and {@code source}. */
    public static Checkpoint read(Path file, Configuration conf, BufferAllocator allocator, HostMemorySource source)
            throws IOException {
        FileSystem fs = file.getFileSystem(conf);
        long length = fs.getFileStatus(file).getLen();
        // The reader's own buffers come from a child allocator, so that a failure anywhere cannot leave them behind.
        try (BufferAllocator readerMemory = allocator.newChildAllocator("checkpoint-reader", 0, Long.MAX_VALUE);
             FSDataInputStream in = fs.open(file);
             ArrowFileReader reader = new ArrowFileReader(new HadoopReadChannel(in, length), readerMemory)) {
            VectorSchemaRoot root = reader.getVectorSchemaRoot();
            Schema schema = root.getSchema();
            Map<String, String> schemaMetadata = schema.getCustomMetadata();
            String version = schemaMetadata == null ? null : schemaMetadata.get(KEY_VERSION);
            if (!VERSION.equals(version)) {
                throw new IOException(file + " is not a sparkccl checkpoint of version " + VERSION + " ("
                        + KEY_VERSION + " = " + version + ")");
            }
            if (reader.getRecordBlocks().size() != 1 || !reader.loadNextBatch()) {
                throw new IOException(file + " holds " + reader.getRecordBlocks().size()
                        + " record batches; a checkpoint has exactly one");
            }
            long step = Long.parseLong(schemaMetadata.get(KEY_STEP));
            Map<String, String> metadata = new LinkedHashMap<>();
            for (Map.Entry<String, String> e : schemaMetadata.entrySet()) {
                if (e.getKey().startsWith(KEY_META_PREFIX)) {
                    metadata.put(e.getKey().substring(KEY_META_PREFIX.length()), e.getValue());
                }
            }

            GradientBuffer weights = null;
            List<GradientBuffer> slots = new ArrayList<>();
            try {
                FieldVector w = root.getVector(WEIGHTS_COLUMN);
                if (w == null) {
                    throw new IOException(file + " has no '" + WEIGHTS_COLUMN + "' column; columns: " + schema.getFields());
                }
                weights = load(file, w, WEIGHTS_COLUMN, allocator, source);
                for (FieldVector v : root.getFieldVectors()) {
                    String name = v.getField().getName();
                    if (name.startsWith(STATE_COLUMN_PREFIX)) {
                        slots.add(load(file, v, name.substring(STATE_COLUMN_PREFIX.length()), allocator, source));
                    }
                }
                for (GradientBuffer s : slots) {
                    if (!s.layout().equals(weights.layout())) {
                        throw new IOException(file + ": optimizer slot '" + s.name() + "' has another layout than "
                                + "the weights");
                    }
                }
                return new Checkpoint(file, step, metadata, weights, slots);
            } catch (IOException | RuntimeException e) {
                if (weights != null) {
                    weights.close();
                }
                slots.forEach(GradientBuffer::close);
                throw e;
            }
        }
    }

    /** A new buffer named {@code name} holding the column {@code v}'s values. */
    private static GradientBuffer load(Path file, FieldVector v, String name, BufferAllocator allocator,
            HostMemorySource source) throws IOException {
        Field field = v.getField();
        TensorLayout layout;
        ElementType type;
        try {
            layout = TensorLayout.fromMetadata(field.getMetadata());
            type = GradientBuffer.elementTypeOf(field);
        } catch (IllegalArgumentException e) {
            throw new IOException(file + ", column '" + field.getName() + "': " + e.getMessage(), e);
        }
        if (v.getValueCount() != layout.elementCount() || v.getNullCount() != 0) {
            throw new IOException(file + ", column '" + field.getName() + "' holds " + v.getValueCount() + " values ("
                    + v.getNullCount() + " null); its layout says " + layout.elementCount() + " and none null");
        }
        GradientBuffer buffer = GradientBuffer.allocate(allocator, name, layout, type, source);
        MemoryUtil.copyMemory(v.getDataBuffer().memoryAddress(), buffer.address(), buffer.byteLength());
        return buffer;
    }

    // ---- Contents. --------------------------------------------------------------------------

    public Path path() {
        return path;
    }

    public long step() {
        return step;
    }

    /** The string map given to {@link #write}. */
    public Map<String, String> metadata() {
        return metadata;
    }

    public GradientBuffer weights() {
        return weights;
    }

    /** The optimizer's slots in the order they were written, each named after its slot. */
    public List<GradientBuffer> optimizerSlots() {
        return optimizerSlots;
    }

    /**
     * Resumes training state: copies the weights and every optimizer slot into live buffers of the
     * same layout (converting element types if they differ). {@code liveSlots} must be the same
     * slots, by name and in order.
     */
    public void copyInto(GradientBuffer liveWeights, List<GradientBuffer> liveSlots) {
        if (!names(liveSlots).equals(names(optimizerSlots))) {
            throw new IllegalArgumentException("checkpoint " + path + " has optimizer slots "
                    + names(optimizerSlots) + ", the live optimizer " + names(liveSlots)
                    + "; was it written by another optimizer?");
        }
        liveWeights.copyFrom(weights);
        for (int i = 0; i < liveSlots.size(); i++) {
            liveSlots.get(i).copyFrom(optimizerSlots.get(i));
        }
    }

    private static List<String> names(List<GradientBuffer> buffers) {
        return buffers.stream().map(GradientBuffer::name).toList();
    }

    /** Closes the weights and every slot; all are attempted, the first failure is thrown with the rest suppressed. */
    @Override
    public void close() {
        List<AutoCloseable> all = new ArrayList<>(optimizerSlots);
        all.add(0, weights);
        CloseHelper.closeAll(all);
    }

    @Override
    public String toString() {
        return "Checkpoint step " + step + " at " + path + " (" + weights.layout().tensorCount() + " tensors, "
                + "optimizer slots " + names(optimizerSlots) + ")";
    }
}
