package org.sparkccl.core.bootstrap;

/**
 * The two calls of a {@link org.sparkccl.core.Bootstrap}, as the bootstraps that carry them between
 * processes tag them: a byte for the kind and a call number, so that ranks whose calls differ fail
 * naming both instead of handing each other the wrong bytes.
 */
final class BootstrapCall {
    static final byte ALL_GATHER = 1;
    static final byte BARRIER = 2;

    private BootstrapCall() {
    }

    /** "allGather #3": call {@code number} (counted from 1) of kind {@code kind}, for errors. */
    static String describe(byte kind, int number) {
        String name = kind == ALL_GATHER ? "allGather" : kind == BARRIER ? "barrier" : "call kind " + kind;
        return name + " #" + number;
    }
}
