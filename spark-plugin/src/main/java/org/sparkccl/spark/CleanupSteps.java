package org.sparkccl.spark;

import java.util.ArrayList;
import java.util.List;

/**
 * Shutdown that runs every step even when one fails, and reports the first failure with the later
 * ones attached as suppressed, so that one broken resource does not leak the rest.
 */
public final class CleanupSteps {
    /** One step of a cleanup. */
    @FunctionalInterface
    public interface Step {
        void run() throws Exception;
    }

    private final List<String> names = new ArrayList<>();
    private final List<Step> steps = new ArrayList<>();

    public CleanupSteps add(String name, Step step) {
        names.add(name);
        steps.add(step);
        return this;
    }

    /** Runs every step in order; throws the first failure (later ones suppressed) once all have run. */
    public void runAll() {
        RuntimeException first = null;
        for (int i = 0; i < steps.size(); i++) {
            try {
                steps.get(i).run();
            } catch (Throwable t) {
                if (first == null) {
                    first = new IllegalStateException("sparkccl cleanup step '" + names.get(i) + "' failed: "
                            + t.getMessage(), t);
                } else {
                    first.addSuppressed(t);
                }
            }
        }
        if (first != null) {
            throw first;
        }
    }
}
