package org.sparkccl.tools.launch;

import java.util.List;

/**
 * How a launch ended: each rank's pid, exit code and last lines of output, and, when it failed, which
 * rank failed first and how (the message names it, as mpirun does).
 */
public final class LaunchResult {
    private final long[] pids;
    private final int[] exitCodes;
    private final List<List<String>> outputTails;
    private final int failedRank;
    private final String failure;

    LaunchResult(long[] pids, int[] exitCodes, List<List<String>> outputTails, int failedRank, String failure) {
        this.pids = pids.clone();
        this.exitCodes = exitCodes.clone();
        this.outputTails = outputTails;
        this.failedRank = failedRank;
        this.failure = failure;
    }

    public boolean succeeded() {
        return failure == null;
    }

    /** Null on success; otherwise what went wrong first, naming the rank. */
    public String failure() {
        return failure;
    }

    /** The rank that failed first, or -1 (success, or the launch timed out with every rank alive). */
    public int failedRank() {
        return failedRank;
    }

    public int size() {
        return pids.length;
    }

    public long pid(int rank) {
        return pids[rank];
    }

    /** The rank's exit code; 128 + N when signal N killed it, as a shell reports it. */
    public int exitCode(int rank) {
        return exitCodes[rank];
    }

    /** The last lines the rank wrote, stdout and stderr interleaved as they arrived. */
    public List<String> outputTail(int rank) {
        return outputTails.get(rank);
    }

    /** The exit status a launcher process should end with: 0, or the failed rank's code (at least 1). */
    public int exitStatus() {
        if (succeeded()) {
            return 0;
        }
        int code = failedRank >= 0 ? exitCodes[failedRank] : 1;
        return code > 0 && code < 256 ? code : 1;
    }

    /** Throws {@link RankFailedException} unless every rank exited with 0. */
    public LaunchResult requireSuccess() {
        if (!succeeded()) {
            throw new RankFailedException(this);
        }
        return this;
    }

    /** "exited with code 3" or "was killed by signal 9 (SIGKILL)". */
    static String describeExit(int code) {
        if (code > 128 && code <= 128 + 64) {
            int signal = code - 128;
            return "was killed by signal " + signal + signalName(signal);
        }
        return "exited with code " + code;
    }

    private static String signalName(int signal) {
        switch (signal) {
            case 1: return " (SIGHUP)";
            case 2: return " (SIGINT)";
            case 4: return " (SIGILL)";
            case 6: return " (SIGABRT)";
            case 7: return " (SIGBUS)";
            case 9: return " (SIGKILL)";
            case 11: return " (SIGSEGV)";
            case 15: return " (SIGTERM)";
            default: return "";
        }
    }
}
