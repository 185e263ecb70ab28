package org.sparkccl.arrow;

import java.util.Locale;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.Float2Vector;
import org.apache.arrow.vector.Float4Vector;
import org.apache.arrow.vector.Float8Vector;
import org.apache.arrow.vector.SmallIntVector;
import org.apache.arrow.vector.types.FloatingPointPrecision;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;
import org.sparkccl.core.DataType;
import org.sparkccl.core.reduce.HalfFloats;

/**
 * The element type of a {@link GradientBuffer}, and how it maps to Arrow and to the collectives'
 * {@link DataType}. Arrow stores values little-endian; so do the collectives (x86 and ARM hosts,
 * and GPUs).
 *
 * <p>bfloat16 has no Arrow type. It is stored as Arrow int16 (a {@link SmallIntVector} holding the
 * raw bits) with field metadata {@code sparkccl.element_type=bfloat16}; a reader that does not know
 * sparkccl sees int16 bit patterns, never wrong numbers that look right. A FixedSizeBinary(2) would
 * have said as little and costs a byte[] per element to read.
 */
public enum ElementType {
    FLOAT32("float32", DataType.FLOAT32, new ArrowType.FloatingPoint(FloatingPointPrecision.SINGLE)),
    FLOAT64("float64", DataType.FLOAT64, new ArrowType.FloatingPoint(FloatingPointPrecision.DOUBLE)),
    FLOAT16("float16", DataType.FLOAT16, new ArrowType.FloatingPoint(FloatingPointPrecision.HALF)),
    BFLOAT16("bfloat16", DataType.BFLOAT16, new ArrowType.Int(16, true));

    private final String metadataName;
    private final DataType dataType;
    private final ArrowType arrowType;

    ElementType(String metadataName, DataType dataType, ArrowType arrowType) {
        this.metadataName = metadataName;
        this.dataType = dataType;
        this.arrowType = arrowType;
    }

    /** The name written in field metadata: {@code float32}, {@code float64}, {@code float16}, {@code bfloat16}. */
    public String metadataName() {
        return metadataName;
    }

    /** The type collectives take for this buffer. */
    public DataType dataType() {
        return dataType;
    }

    public ArrowType arrowType() {
        return arrowType;
    }

    public int byteWidth() {
        return dataType.size();
    }

    /** Accepts {@link #metadataName()}, the enum name and the collectives' names (float, double, half, bf16). */
    public static ElementType fromName(String name) {
        String n = name.trim().toLowerCase(Locale.ROOT);
        for (ElementType t : values()) {
            if (t.metadataName.equals(n) || t.name().toLowerCase(Locale.ROOT).equals(n)) {
                return t;
            }
        }
        try {
            return fromDataType(DataType.fromName(n));
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("unknown gradient element type '" + name
                    + "': use one of float32, float64, float16, bfloat16");
        }
    }

    public static ElementType fromDataType(DataType type) {
        for (ElementType t : values()) {
            if (t.dataType == type) {
                return t;
            }
        }
        throw new IllegalArgumentException("gradient buffers hold floating-point values; " + type.ncclName()
                + " is not one: use float32, float64, float16 or bfloat16");
    }

    /** A fixed-width vector of this type for {@code field}, empty: {@link GradientBuffer} loads its memory. */
    FieldVector newVector(Field field, BufferAllocator allocator) {
        switch (this) {
            case FLOAT32: return new Float4Vector(field, allocator);
            case FLOAT64: return new Float8Vector(field, allocator);
            case FLOAT16: return new Float2Vector(field, allocator);
            case BFLOAT16: return new SmallIntVector(field, allocator);
            default: throw new AssertionError(this);
        }
    }

    /** Element {@code index} of {@code buf}, widened to float. */
    float getFloat(ArrowBuf buf, long index) {
        switch (this) {
            case FLOAT32: return buf.getFloat(index * 4);
            case FLOAT64: return (float) buf.getDouble(index * 8);
            case FLOAT16: return HalfFloats.halfToFloat(buf.getShort(index * 2));
            case BFLOAT16: return HalfFloats.bfloat16ToFloat(buf.getShort(index * 2));
            default: throw new AssertionError(this);
        }
    }

    double getDouble(ArrowBuf buf, long index) {
        return this == FLOAT64 ? buf.getDouble(index * 8) : getFloat(buf, index);
    }

    /** Stores {@code value}, rounded to nearest-even where this type is narrower than float. */
    void setFloat(ArrowBuf buf, long index, float value) {
        switch (this) {
            case FLOAT32: buf.setFloat(index * 4, value); break;
            case FLOAT64: buf.setDouble(index * 8, value); break;
            case FLOAT16: buf.setShort(index * 2, HalfFloats.floatToHalf(value)); break;
            case BFLOAT16: buf.setShort(index * 2, HalfFloats.floatToBfloat16(value)); break;
            default: throw new AssertionError(this);
        }
    }

    void setDouble(ArrowBuf buf, long index, double value) {
        if (this == FLOAT64) {
            buf.setDouble(index * 8, value);
        } else {
            setFloat(buf, index, (float) value);
        }
    }
}
