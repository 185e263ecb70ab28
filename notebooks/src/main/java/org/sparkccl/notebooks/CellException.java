package org.sparkccl.notebooks;

/** A cell failed: its message is what the notebook shows as the error. */
final class CellException extends Exception {
    CellException(String message) {
        super(message);
    }
}
