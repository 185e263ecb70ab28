package org.sparkccl.ipc.reliability;

/**
 * The reliability suite's sizes: each check has a short version that CI runs and a long one tagged
 * {@code soak} ({@code mvn -B verify -Psoak}). The numbers are here, once, so docs/reliability.md
 * can quote them.
 */
final class Soak {
    static final int KILL_TRIALS_CI = 10;
    static final int KILL_TRIALS_SOAK = 100;

    private Soak() {
    }
}
