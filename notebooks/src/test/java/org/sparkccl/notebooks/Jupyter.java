package org.sparkccl.notebooks;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Runs {@code jupyter nbconvert --execute} with the kernel this build made: its kernelspec is
 * written under target/ and found through JUPYTER_PATH, so the tests run the classes just built,
 * whatever kernel the user installed.
 */
final class Jupyter {
    /** Set by .ci/run: there, a missing jupyter fails the tests instead of skipping them. */
    static final boolean REQUIRED = "1".equals(System.getenv("CI_REQUIRE_JUPYTER"));

    private final Path jupyterPath;

    private Jupyter(Path jupyterPath) {
        this.jupyterPath = jupyterPath;
    }

    /** Why notebooks cannot run here, or null when they can. */
    static String missing() {
        try {
            Process p = new ProcessBuilder("jupyter", "nbconvert", "--version").redirectErrorStream(true).start();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0) {
                return "'jupyter nbconvert --version' failed: " + out.strip();
            }
            return null;
        } catch (IOException e) {
            return "jupyter is not on PATH (" + e.getMessage() + ")";
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return "interrupted";
        }
    }

    /** Writes this build's kernelspec under {@code dir}/kernels. */
    static Jupyter withBuiltKernel(Path dir) throws IOException {
        Path repo = Path.of(System.getProperty("sparkccl.repoRoot"));
        KernelSpec.write(dir.resolve("kernels"), Path.of(System.getProperty("sparkccl.kernelClasspath")),
                Path.of(System.getProperty("sparkccl.kernelClasses")), repo.resolve("scripts/spark-jvm-options"));
        return new Jupyter(dir);
    }

    /** The outcome of one nbconvert run: its exit code and its output (stdout and stderr). */
    record Run(int exitCode, String output) {
    }

    /** Executes {@code notebook} into {@code outDir} (same file name). */
    Run execute(Path notebook, Path outDir) throws IOException, InterruptedException {
        Files.createDirectories(outDir);
        ProcessBuilder pb = new ProcessBuilder(List.of("jupyter", "nbconvert", "--to", "notebook", "--execute",
                "--ExecutePreprocessor.kernel_name=" + KernelSpec.NAME, "--ExecutePreprocessor.timeout=600",
                "--output-dir", outDir.toString(), notebook.toString()))
                .redirectErrorStream(true);
        pb.environment().put("JUPYTER_PATH", jupyterPath.toString());
        Path log = outDir.resolve(notebook.getFileName() + ".log");
        pb.redirectOutput(log.toFile());
        Process p = pb.start();
        if (!p.waitFor(15, TimeUnit.MINUTES)) {
            p.descendants().forEach(ProcessHandle::destroyForcibly);
            p.destroyForcibly();
            return new Run(-1, "timed out after 15 minutes\n" + Files.readString(log));
        }
        return new Run(p.exitValue(), Files.readString(log));
    }
}
