package org.sparkccl.core;

/** Another rank died or aborted while this rank waited on it. */
public class PeerFailedException extends CclException {
    private final int failedRank;

    public PeerFailedException(int failedRank, String message) {
        super(message);
        this.failedRank = failedRank;
    }

    /**
     * The same failure with more context: what the caller (Spark, a launcher) knows of what happens
     * next, appended to {@code message}; {@code cause} is the engine's original exception.
     */
    public PeerFailedException(int failedRank, String message, Throwable cause) {
        super(message, cause);
        this.failedRank = failedRank;
    }

    /** The rank that died or first aborted. */
    public int failedRank() {
        return failedRank;
    }
}
