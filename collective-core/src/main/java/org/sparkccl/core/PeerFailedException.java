package org.sparkccl.core;

/** Another rank died or aborted while this rank waited on it. */
public class PeerFailedException extends CclException {
    private final int failedRank;

    public PeerFailedException(int failedRank, String message) {
        super(message);
        this.failedRank = failedRank;
    }

    /** The rank that died or first aborted. */
    public int failedRank() {
        return failedRank;
    }
}
