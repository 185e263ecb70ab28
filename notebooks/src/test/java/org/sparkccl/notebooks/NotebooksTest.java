package org.sparkccl.notebooks;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Executes every notebook in notebooks/ with the kernel this build made, as a user would
 * (`jupyter nbconvert --to notebook --execute`), and reads what they produced: no error output,
 * and a PNG from every cell that draws. Also checks that a failing cell fails the run. Without
 * jupyter the tests that need it are skipped, saying why, except where CI_REQUIRE_JUPYTER=1 (CI).
 */
class NotebooksTest {
    private static final Path REPO = Path.of(System.getProperty("sparkccl.repoRoot")).normalize();
    private static final Path NOTEBOOKS = REPO.resolve("notebooks");
    private static final Path TARGET = NOTEBOOKS.resolve("target");
    private static String jupyterMissing;

    @BeforeAll
    static void findJupyter() {
        jupyterMissing = Jupyter.missing();
        if (jupyterMissing != null) {
            String message = "notebooks not executed: " + jupyterMissing
                    + " (Debian: apt-get install jupyter-nbconvert python3-nbclient python3-ipykernel jupyter-client)";
            if (Jupyter.REQUIRED) {
                fail(message + "; CI_REQUIRE_JUPYTER=1 requires them");
            }
            System.out.println("SKIPPED " + message);
        }
    }

    static List<Path> notebooks() throws IOException {
        try (Stream<Path> files = Files.list(NOTEBOOKS)) {
            return files.filter(p -> p.toString().endsWith(".ipynb")).sorted().collect(Collectors.toList());
        }
    }

    static JsonArray cells(Path notebook) throws IOException {
        return new JsonParser().parse(Files.readString(notebook)).getAsJsonObject().getAsJsonArray("cells");
    }

    static String source(JsonObject cell) {
        JsonElement source = cell.get("source");
        if (source.isJsonArray()) {
            StringBuilder text = new StringBuilder();
            source.getAsJsonArray().forEach(line -> text.append(line.getAsString()));
            return text.toString();
        }
        return source.getAsString();
    }

    @Test
    void committedNotebooksHaveTheirOutputsCleared() throws IOException {
        List<Path> notebooks = notebooks();
        assertFalse(notebooks.isEmpty(), "no notebook in " + NOTEBOOKS);
        for (Path notebook : notebooks) {
            for (JsonElement c : cells(notebook)) {
                JsonObject cell = c.getAsJsonObject();
                if (cell.get("cell_type").getAsString().equals("code")) {
                    assertEquals(0, cell.getAsJsonArray("outputs").size(), notebook.getFileName()
                            + ": commit notebooks with outputs cleared (jupyter nbconvert --clear-output --inplace), "
                            + "cell: " + source(cell));
                    assertTrue(cell.get("execution_count").isJsonNull(), notebook.getFileName() + ": execution count set");
                }
            }
        }
    }

    @Test
    void everyNotebookRunsTopToBottomAndEveryPlotCellDrawsAPng() throws Exception {
        Assumptions.assumeTrue(jupyterMissing == null, () -> "jupyter missing: " + jupyterMissing);
        Jupyter jupyter = Jupyter.withBuiltKernel(TARGET.resolve("jupyter"));
        List<String> failures = new ArrayList<>();
        for (Path notebook : notebooks()) {
            long start = System.nanoTime();
            Jupyter.Run run = jupyter.execute(notebook, TARGET.resolve("executed"));
            System.out.printf("%s: exit %d in %.0f s%n", notebook.getFileName(), run.exitCode(),
                    (System.nanoTime() - start) / 1e9);
            if (run.exitCode() != 0) {
                failures.add(notebook.getFileName() + " failed (exit " + run.exitCode() + "):\n" + tail(run.output()));
                continue;
            }
            failures.addAll(checkOutputs(TARGET.resolve("executed").resolve(notebook.getFileName())));
        }
        assertTrue(failures.isEmpty(), String.join("\n\n", failures));
    }

    /** No error outputs; a PNG from every cell that draws (calls Display.chart or Display.png). */
    static List<String> checkOutputs(Path executed) throws IOException {
        List<String> failures = new ArrayList<>();
        int plots = 0;
        for (JsonElement c : cells(executed)) {
            JsonObject cell = c.getAsJsonObject();
            if (!cell.get("cell_type").getAsString().equals("code")) {
                continue;
            }
            String source = source(cell);
            boolean png = false;
            for (JsonElement o : cell.getAsJsonArray("outputs")) {
                JsonObject output = o.getAsJsonObject();
                if (output.get("output_type").getAsString().equals("error")) {
                    failures.add(executed.getFileName() + ": error output " + output.get("ename") + " in cell:\n" + source);
                }
                if (output.has("data") && output.getAsJsonObject("data").has("image/png")) {
                    png = true;
                }
            }
            if (source.contains("Display.chart(") || source.contains("Display.png(")) {
                plots++;
                if (!png) {
                    failures.add(executed.getFileName() + ": a plot cell produced no PNG:\n" + source);
                }
            }
        }
        System.out.println(executed.getFileName() + ": " + plots + " plot cell(s) checked");
        return failures;
    }

    @Test
    void aCellThatThrowsOrDoesNotCompileFailsTheRunWithItsError() throws Exception {
        Assumptions.assumeTrue(jupyterMissing == null, () -> "jupyter missing: " + jupyterMissing);
        Jupyter jupyter = Jupyter.withBuiltKernel(TARGET.resolve("jupyter"));
        Path dir = TARGET.resolve("failing");
        Files.createDirectories(dir);
        String[][] cases = {
                {"throws", "int x = 1;\\nif (x == 1) throw new IllegalStateException(\\\"cell failed on purpose\\\");",
                        "cell failed on purpose"},
                {"no-compile", "int y = notDefinedAnywhere;", "cannot find symbol"},
        };
        for (String[] c : cases) {
            Path notebook = dir.resolve(c[0] + ".ipynb");
            Files.writeString(notebook, "{\"cells\": [{\"cell_type\": \"code\", \"execution_count\": null, \"id\": \"a\","
                    + " \"metadata\": {}, \"outputs\": [], \"source\": \"" + c[1] + "\"},"
                    + " {\"cell_type\": \"code\", \"execution_count\": null, \"id\": \"b\", \"metadata\": {}, \"outputs\": [],"
                    + " \"source\": \"System.out.println(\\\"after\\\");\"}],"
                    + " \"metadata\": {\"kernelspec\": {\"name\": \"" + KernelSpec.NAME + "\", \"display_name\": \"Java\","
                    + " \"language\": \"java\"}}, \"nbformat\": 4, \"nbformat_minor\": 5}");
            Jupyter.Run run = jupyter.execute(notebook, dir.resolve("out"));
            assertNotEquals(0, run.exitCode(), c[0] + ": nbconvert must fail; output:\n" + tail(run.output()));
            assertTrue(run.output().contains(c[2]), c[0] + ": the error must show '" + c[2] + "'; output:\n"
                    + tail(run.output()));
        }
    }

    private static String tail(String text) {
        return text.length() <= 6000 ? text : "..." + text.substring(text.length() - 6000);
    }
}
