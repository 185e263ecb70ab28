package org.sparkccl.core;

import java.util.Locale;

/** Element types a collective can carry, named as nccl-tests names them on the command line. */
public enum DataType {
    FLOAT32("float", 4, true),
    FLOAT64("double", 8, true),
    FLOAT16("half", 2, true),
    BFLOAT16("bfloat16", 2, true),
    INT32("int32", 4, false),
    INT64("int64", 8, false),
    INT8("int8", 1, false),
    UINT8("uint8", 1, false);

    private final String ncclName;
    private final int size;
    private final boolean floatingPoint;

    DataType(String ncclName, int size, boolean floatingPoint) {
        this.ncclName = ncclName;
        this.size = size;
        this.floatingPoint = floatingPoint;
    }

    /** The name nccl-tests uses ({@code float}, {@code half}, ...). */
    public String ncclName() {
        return ncclName;
    }

    /** Bytes per element. */
    public int size() {
        return size;
    }

    public boolean isFloatingPoint() {
        return floatingPoint;
    }

    /** Accepts nccl-tests' names and this enum's names, in any case. */
    public static DataType fromName(String name) {
        String n = name.trim().toLowerCase(Locale.ROOT);
        for (DataType t : values()) {
            if (t.ncclName.equals(n) || t.name().toLowerCase(Locale.ROOT).equals(n)) {
                return t;
            }
        }
        switch (n) {
            case "float32": return FLOAT32;
            case "float64": return FLOAT64;
            case "float16": return FLOAT16;
            case "bf16": return BFLOAT16;
            default:
                throw new IllegalArgumentException("unknown data type '" + name
                        + "': use one of float, double, half, bfloat16, int32, int64, int8, uint8");
        }
    }
}
