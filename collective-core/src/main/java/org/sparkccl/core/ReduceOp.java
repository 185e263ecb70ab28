package org.sparkccl.core;

import java.util.Locale;

/** Reduction operators, named as nccl-tests names them. {@code AVG} is a sum divided by the rank count. */
public enum ReduceOp {
    SUM, PROD, MIN, MAX, AVG;

    public String ncclName() {
        return name().toLowerCase(Locale.ROOT);
    }

    public static ReduceOp fromName(String name) {
        String n = name.trim().toUpperCase(Locale.ROOT);
        for (ReduceOp op : values()) {
            if (op.name().equals(n)) {
                return op;
            }
        }
        throw new IllegalArgumentException("unknown reduction op '" + name + "': use one of sum, prod, min, max, avg");
    }
}
