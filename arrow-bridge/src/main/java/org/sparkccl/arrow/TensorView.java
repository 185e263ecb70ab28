package org.sparkccl.arrow;

/**
 * One tensor of a {@link GradientBuffer}: its elements, row-major, at {@link #offset()} in the flat
 * buffer. A view: it shares the buffer's memory and is valid while the buffer is open.
 */
public final class TensorView {
    private final GradientBuffer buffer;
    private final TensorInfo info;

    TensorView(GradientBuffer buffer, TensorInfo info) {
        this.buffer = buffer;
        this.info = info;
    }

    public String name() {
        return info.name();
    }

    public long[] shape() {
        return info.shape();
    }

    public TensorInfo info() {
        return info;
    }

    /** Element offset in the flat buffer. */
    public long offset() {
        return info.offset();
    }

    public long elementCount() {
        return info.elementCount();
    }

    /** Host address of this tensor's first element. */
    public long address() {
        return buffer.address() + info.offset() * buffer.elementType().byteWidth();
    }

    public long byteLength() {
        return info.elementCount() * buffer.elementType().byteWidth();
    }

    public float getFloat(long i) {
        return buffer.getFloat(flat(i));
    }

    public void setFloat(long i, float value) {
        buffer.setFloat(flat(i), value);
    }

    public double getDouble(long i) {
        return buffer.getDouble(flat(i));
    }

    public void setDouble(long i, double value) {
        buffer.setDouble(flat(i), value);
    }

    /** Element {@code [row, col]} of a 2-D tensor. */
    public float getFloat(long row, long col) {
        return buffer.getFloat(flat(index2(row, col)));
    }

    public void setFloat(long row, long col, float value) {
        buffer.setFloat(flat(index2(row, col)), value);
    }

    public void fill(double value) {
        buffer.fill(info.offset(), info.elementCount(), value);
    }

    /** This tensor := {@code values} (exactly {@link #elementCount()} of them, row-major). */
    public void copyFrom(float[] values) {
        requireLength(values.length);
        buffer.copyFrom(values, 0, info.offset(), values.length);
    }

    public void copyFrom(double[] values) {
        requireLength(values.length);
        buffer.copyFrom(values, 0, info.offset(), values.length);
    }

    public void copyTo(float[] values) {
        requireLength(values.length);
        buffer.copyTo(info.offset(), values, 0, values.length);
    }

    public float[] toFloatArray() {
        float[] out = new float[Math.toIntExact(info.elementCount())];
        buffer.copyTo(info.offset(), out, 0, out.length);
        return out;
    }

    private long flat(long i) {
        if (i < 0 || i >= info.elementCount()) {
            throw new IndexOutOfBoundsException("element " + i + " of tensor '" + info.name() + "' ("
                    + info.elementCount() + " elements)");
        }
        return info.offset() + i;
    }

    private long index2(long row, long col) {
        if (info.rank() != 2) {
            throw new IllegalArgumentException("tensor '" + info.name() + "' has rank " + info.rank() + ", not 2");
        }
        if (row < 0 || row >= info.dim(0) || col < 0 || col >= info.dim(1)) {
            throw new IndexOutOfBoundsException("[" + row + ", " + col + "] outside tensor '" + info.name() + "' "
                    + info.dim(0) + " x " + info.dim(1));
        }
        return row * info.dim(1) + col;
    }

    private void requireLength(int length) {
        if (length != info.elementCount()) {
            throw new IllegalArgumentException("tensor '" + info.name() + "' holds " + info.elementCount()
                    + " elements, the array " + length);
        }
    }

    @Override
    public String toString() {
        return "tensor " + info + " of " + buffer.name();
    }
}
