package org.sparkccl.arrow;

import org.sparkccl.core.memory.HostMemoryBlock;
import org.sparkccl.core.memory.HostMemorySource;
import org.sparkccl.core.memory.HostMemorySources;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.util.MemoryUtil;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.ipc.message.ArrowFieldNode;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.FieldType;
import org.apache.arrow.vector.types.pojo.Schema;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.DataType;
import org.sparkccl.core.MemoryKind;
import org.sparkccl.core.ReduceOp;

/**
 * A model's named parameter tensors (or their gradients, or one slot of optimizer state) flattened
 * into one contiguous Arrow vector, so that one collective call covers the whole model. The memory
 * comes from a {@link HostMemorySource} (pinned where CUDA is present, else plain off-heap) and is
 * accounted by an Arrow {@link BufferAllocator} as a foreign allocation; {@link #close()} gives it
 * back. The vector's field metadata records the {@link TensorLayout} and the {@link ElementType}, so
 * the buffer round-trips through Arrow IPC (see {@link Checkpoint}).
 *
 * <p>Collectives run in place on the vector's memory ({@link #allReduce(Communicator, ReduceOp)}, or
 * {@link #address()}, {@link #elementCount()}, {@link #dataType()} for any other call): nothing is
 * copied into Java arrays. Element accessors widen to float or double and round back on store.
 *
 * <p>Not thread safe, like the communicator it is reduced with.
 */
public final class GradientBuffer implements AutoCloseable {
    /** Field metadata key naming the element type ({@link ElementType#metadataName()}). */
    public static final String KEY_ELEMENT_TYPE = "sparkccl.element_type";
    public static final String DEFAULT_NAME = "gradients";

    /** Bulk copies go through NIO views of at most this many bytes (a ByteBuffer is int-indexed). */
    private static final int COPY_CHUNK_BYTES = 1 << 30;

    private final BufferAllocator allocator;
    private final TensorLayout layout;
    private final ElementType type;
    private final HostMemorySource source;
    private final FieldVector vector;
    private final HostMemoryBlock block;
    private final ArrowBuf data;
    private final long address;
    private final long count;
    private boolean closed;

    private GradientBuffer(BufferAllocator allocator, TensorLayout layout, ElementType type,
            HostMemorySource source, FieldVector vector, HostMemoryBlock block) {
        this.allocator = allocator;
        this.block = block;
        this.layout = layout;
        this.type = type;
        this.source = source;
        this.vector = vector;
        this.data = vector.getDataBuffer();
        this.address = data.memoryAddress();
        this.count = layout.elementCount();
    }

    /** float32, named {@value #DEFAULT_NAME}, in the {@linkplain HostMemorySources#preferred() preferred} host memory. */
    public static GradientBuffer allocate(BufferAllocator allocator, TensorLayout layout) {
        return allocate(allocator, DEFAULT_NAME, layout, ElementType.FLOAT32, HostMemorySources.preferred());
    }

    public static GradientBuffer allocate(BufferAllocator allocator, TensorLayout layout, ElementType type) {
        return allocate(allocator, DEFAULT_NAME, layout, type, HostMemorySources.preferred());
    }

    /**
     * A zero-filled buffer for {@code layout}. {@code name} becomes the Arrow field name (a checkpoint
     * column: {@code weights}, {@code momentum}, ...).
     */
    public static GradientBuffer allocate(BufferAllocator allocator, String name, TensorLayout layout,
            ElementType type, HostMemorySource source) {
        long bytes = layout.elementCount() * type.byteWidth();
        Field field = field(name, layout, type);
        String why = source.unavailableReason();
        if (why != null) {
            throw new IllegalStateException("host memory source '" + source.name() + "' cannot allocate here: " + why);
        }
        HostMemoryBlock block = source.allocate(bytes);
        ArrowBuf memory = ForeignHostAllocation.wrap(allocator, block);
        FieldVector vector = null;
        try {
            memory.setZero(0, bytes);
            vector = type.newVector(field, allocator);
            // No validity buffer and no nulls: the vector makes an all-valid one and retains our memory.
            vector.loadFieldBuffers(new ArrowFieldNode(layout.elementCount(), 0), Arrays.asList(null, memory));
            GradientBuffer buffer = new GradientBuffer(allocator, layout, type, source, vector, block);
            vector = null;
            return buffer;
        } finally {
            if (vector != null) {
                vector.close();
            }
            memory.close(); // the vector holds its own reference
        }
    }

    /** The Arrow field a buffer of this layout and type has: non-nullable, layout and type in its metadata. */
    public static Field field(String name, TensorLayout layout, ElementType type) {
        Map<String, String> metadata = new LinkedHashMap<>();
        metadata.put(KEY_ELEMENT_TYPE, type.metadataName());
        metadata.putAll(layout.toMetadata());
        return new Field(name, new FieldType(false, type.arrowType(), null, metadata), null);
    }

    /** The element type recorded in a field written by {@link #field}; checks it agrees with the Arrow type. */
    public static ElementType elementTypeOf(Field field) {
        Map<String, String> metadata = field.getMetadata();
        String name = metadata == null ? null : metadata.get(KEY_ELEMENT_TYPE);
        if (name == null) {
            throw new IllegalArgumentException("field '" + field.getName() + "' has no " + KEY_ELEMENT_TYPE
                    + " metadata; it was not written by GradientBuffer");
        }
        ElementType t = ElementType.fromName(name);
        if (!t.arrowType().equals(field.getType())) {
            throw new IllegalArgumentException("field '" + field.getName() + "' says " + name + " but its Arrow type is "
                    + field.getType() + " (expected " + t.arrowType() + ")");
        }
        return t;
    }

    /** A new zero-filled buffer with this one's layout, type, allocator and memory source. */
    public GradientBuffer allocateLike(String name) {
        return allocate(allocator, name, layout, type, source);
    }

    public GradientBuffer allocateLike(String name, ElementType otherType) {
        return allocate(allocator, name, layout, otherType, source);
    }

    // ---- What collectives need. ------------------------------------------------------------

    /** Host address of element 0. */
    public long address() {
        checkOpen();
        return address;
    }

    public long byteLength() {
        return count * type.byteWidth();
    }

    public long elementCount() {
        return count;
    }

    public DataType dataType() {
        return type.dataType();
    }

    /**
     * In place: every rank's buffer becomes {@code op} over all ranks' buffers. Every rank must call
     * it with the same layout and type. A host communicator reduces the host memory; a GPU one the
     * same memory through its device pointer, so the buffer must then be in mapped pinned memory.
     */
    public void allReduce(Communicator comm, ReduceOp op) {
        long a = addressFor(comm);
        comm.allReduce(a, a, count, type.dataType(), op);
    }

    /** In place: every rank's buffer becomes root's. */
    public void broadcast(Communicator comm, int root) {
        long a = addressFor(comm);
        comm.broadcast(a, a, count, type.dataType(), root);
    }

    /**
     * The address GPU kernels use for this buffer's memory when it is mapped pinned memory (from the
     * pinned host memory source that ipc registers), else 0.
     */
    public long devicePointer() {
        checkOpen();
        return block.devicePointer();
    }

    /** This buffer's address as {@code comm} takes it: the host address, or the mapped device pointer. */
    private long addressFor(Communicator comm) {
        checkOpen();
        if (comm.memoryKind() == MemoryKind.HOST) {
            return address;
        }
        long device = block.devicePointer();
        if (device == 0) {
            throw new IllegalArgumentException("rank " + comm.rank() + ": this communicator works on "
                    + comm.memoryKind() + " memory, but GradientBuffer '" + name() + "' is in " + source.name()
                    + " host memory, which GPUs cannot reach in place; allocate it from a PinnedHostMemorySource "
                    + "(HostMemorySources.preferred() does where a GPU is usable), or use a host communicator");
        }
        return device;
    }

    // ---- Arrow side. ------------------------------------------------------------------------

    public String name() {
        return vector.getField().getName();
    }

    public TensorLayout layout() {
        return layout;
    }

    public ElementType elementType() {
        return type;
    }

    public HostMemorySource memorySource() {
        return source;
    }

    public BufferAllocator allocator() {
        return allocator;
    }

    public Field field() {
        return vector.getField();
    }

    /** A one-field schema: this buffer's field, with the layout and element type in its metadata. */
    public Schema schema() {
        return new Schema(List.of(vector.getField()));
    }

    /**
     * The Arrow vector over this buffer's memory (a Float4Vector, Float8Vector, Float2Vector or, for
     * bfloat16, a SmallIntVector of raw bits). Owned by this buffer: do not close or resize it.
     */
    public FieldVector vector() {
        checkOpen();
        return vector;
    }

    /** The vector's data buffer: {@link #byteLength()} bytes at {@link #address()}. Owned by this buffer. */
    public ArrowBuf dataBuffer() {
        checkOpen();
        return data;
    }

    // ---- Tensors. ---------------------------------------------------------------------------

    public TensorView tensor(String name) {
        return new TensorView(this, layout.tensor(name));
    }

    public TensorView tensor(int index) {
        return new TensorView(this, layout.tensor(index));
    }

    /** Element offset of tensor {@code name} in the flat buffer. */
    public long offsetOf(String name) {
        return layout.tensor(name).offset();
    }

    // ---- Elements. --------------------------------------------------------------------------

    public float getFloat(long index) {
        checkIndex(index);
        return type.getFloat(data, index);
    }

    public void setFloat(long index, float value) {
        checkIndex(index);
        type.setFloat(data, index, value);
    }

    public double getDouble(long index) {
        checkIndex(index);
        return type.getDouble(data, index);
    }

    public void setDouble(long index, double value) {
        checkIndex(index);
        type.setDouble(data, index, value);
    }

    /** Every element := {@code value}. */
    public void fill(double value) {
        fill(0, count, value);
    }

    void fill(long from, long n, double value) {
        checkRange(from, n);
        if (type == ElementType.FLOAT32) {
            int bits = Float.floatToRawIntBits((float) value);
            for (long a = address + 4 * from, end = address + 4 * (from + n); a < end; a += 4) {
                MemoryUtil.putInt(a, bits);
            }
        } else {
            for (long i = from; i < from + n; i++) {
                type.setDouble(data, i, value);
            }
        }
    }

    /** Whole buffer from {@code values}, which must hold exactly {@link #elementCount()} values. */
    public void copyFrom(float[] values) {
        requireLength(values.length);
        copyFrom(values, 0, 0, values.length);
    }

    public void copyFrom(double[] values) {
        requireLength(values.length);
        copyFrom(values, 0, 0, values.length);
    }

    /** Copies {@code n} values from {@code values[from..]} into elements {@code [at, at + n)}. */
    public void copyFrom(float[] values, int from, long at, int n) {
        checkRange(at, n);
        java.util.Objects.checkFromIndexSize(from, n, values.length);
        if (type == ElementType.FLOAT32) {
            for (int done = 0; done < n; ) {
                int chunk = Math.min(n - done, COPY_CHUNK_BYTES / 4);
                view(at + done, chunk * 4).asFloatBuffer().put(values, from + done, chunk);
                done += chunk;
            }
        } else {
            for (int i = 0; i < n; i++) {
                type.setFloat(data, at + i, values[from + i]);
            }
        }
    }

    public void copyFrom(double[] values, int from, long at, int n) {
        checkRange(at, n);
        java.util.Objects.checkFromIndexSize(from, n, values.length);
        if (type == ElementType.FLOAT64) {
            for (int done = 0; done < n; ) {
                int chunk = Math.min(n - done, COPY_CHUNK_BYTES / 8);
                view(at + done, chunk * 8).asDoubleBuffer().put(values, from + done, chunk);
                done += chunk;
            }
        } else {
            for (int i = 0; i < n; i++) {
                type.setDouble(data, at + i, values[from + i]);
            }
        }
    }

    /** Elements {@code [at, at + n)} into {@code values[to..]}. */
    public void copyTo(long at, float[] values, int to, int n) {
        checkRange(at, n);
        java.util.Objects.checkFromIndexSize(to, n, values.length);
        if (type == ElementType.FLOAT32) {
            for (int done = 0; done < n; ) {
                int chunk = Math.min(n - done, COPY_CHUNK_BYTES / 4);
                view(at + done, chunk * 4).asFloatBuffer().get(values, to + done, chunk);
                done += chunk;
            }
        } else {
            for (int i = 0; i < n; i++) {
                values[to + i] = type.getFloat(data, at + i);
            }
        }
    }

    public void copyTo(long at, double[] values, int to, int n) {
        checkRange(at, n);
        java.util.Objects.checkFromIndexSize(to, n, values.length);
        if (type == ElementType.FLOAT64) {
            for (int done = 0; done < n; ) {
                int chunk = Math.min(n - done, COPY_CHUNK_BYTES / 8);
                view(at + done, chunk * 8).asDoubleBuffer().get(values, to + done, chunk);
                done += chunk;
            }
        } else {
            for (int i = 0; i < n; i++) {
                values[to + i] = type.getDouble(data, at + i);
            }
        }
    }

    public float[] toFloatArray() {
        float[] out = new float[(int) count];
        copyTo(0, out, 0, out.length);
        return out;
    }

    public double[] toDoubleArray() {
        double[] out = new double[(int) count];
        copyTo(0, out, 0, out.length);
        return out;
    }

    /**
     * This buffer := {@code other}, which must have the same layout; converts between element types
     * (rounding to nearest-even when narrowing).
     */
    public void copyFrom(GradientBuffer other) {
        requireSameLayout(other, "copyFrom");
        if (other.type == type) {
            MemoryUtil.copyMemory(other.address(), address(), byteLength());
        } else {
            for (long i = 0; i < count; i++) {
                type.setDouble(data, i, other.type.getDouble(other.data, i));
            }
        }
    }

    /**
     * Frees the memory (back to its source, through the allocator). Idempotent. If the allocator was
     * closed first (Arrow reports that as a leak), the host memory is freed anyway and the
     * allocator's error is rethrown.
     */
    @Override
    public void close() {
        if (!closed) {
            closed = true;
            try {
                vector.close();
            } catch (RuntimeException e) {
                block.close();
                throw e;
            }
        }
    }

    public boolean isClosed() {
        return closed;
    }

    @Override
    public String toString() {
        return "GradientBuffer '" + name() + "' " + type.metadataName() + " x " + count + " (" + layout.tensorCount()
                + " tensors, " + source.name() + " memory" + (closed ? ", closed" : "") + ")";
    }

    // Whole-buffer float32 loops read and write raw memory: the range is checked once, not per element.
    private ByteBuffer view(long at, int bytes) {
        return MemoryUtil.directBuffer(address + at * type.byteWidth(), bytes).order(ByteOrder.LITTLE_ENDIAN);
    }

    // ---- Checks. ----------------------------------------------------------------------------

    private void checkOpen() {
        if (closed) {
            throw new IllegalStateException("GradientBuffer '" + name() + "' is closed");
        }
    }

    private void checkIndex(long index) {
        checkOpen();
        if (index < 0 || index >= count) {
            throw new IndexOutOfBoundsException("element " + index + " of GradientBuffer '" + name() + "' ("
                    + count + " elements)");
        }
    }

    void checkRange(long from, long n) {
        checkOpen();
        if (from < 0 || n < 0 || from + n > count) {
            throw new IndexOutOfBoundsException("elements [" + from + ", " + (from + n) + ") of GradientBuffer '"
                    + name() + "' (" + count + " elements)");
        }
    }

    private void requireLength(int length) {
        if (length != count) {
            throw new IllegalArgumentException("GradientBuffer '" + name() + "' holds " + count + " elements, the array "
                    + length);
        }
    }

    private void requireSameLayout(GradientBuffer other, String what) {
        checkOpen();
        other.checkOpen();
        if (!layout.equals(other.layout)) {
            throw new IllegalArgumentException(what + ": GradientBuffer '" + other.name() + "' has another layout than '"
                    + name() + "' (" + other.layout + " vs " + layout + ")");
        }
    }
}
