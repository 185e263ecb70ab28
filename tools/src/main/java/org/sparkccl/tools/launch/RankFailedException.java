package org.sparkccl.tools.launch;

/** A launched rank failed (or the launch timed out); {@link #result()} has every rank's exit and output. */
public final class RankFailedException extends RuntimeException {
    private final transient LaunchResult result;

    RankFailedException(LaunchResult result) {
        super(result.failure());
        this.result = result;
    }

    public LaunchResult result() {
        return result;
    }
}
