package org.sparkccl.tools.build;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * Every main class of every module that touches Agrona's memory access must add the JDK export
 * in its static initializer, before its own static fields (see {@code JdkAccess}): a class that
 * reaches Agrona first fails to link for the life of the JVM, as every Spark executor on GPUs once
 * did. This reads the sources, so it also covers code no CPU test runs (the GPU engine).
 */
class AgronaAccessOrderTest {
    private static final Pattern USES_AGRONA_MEMORY = Pattern.compile("\\b(UnsafeApi|UnsafeBuffer|BufferUtil|IoUtil)\\b");
    private static final Pattern TYPE_DECLARATION = Pattern.compile(
            "^(public )?(final )?(abstract )?(class|enum) \\w+[^{]*\\{\\n", Pattern.MULTILINE);
    private static final String GATE = "    static {\n        JdkAccess.ensureAgronaAccess();";

    @Test
    void everyClassThatTouchesAgronaAddsTheExportFirst() throws IOException {
        Path root = Paths.get("..").toAbsolutePath().normalize();
        List<Path> users = new ArrayList<>();
        List<String> missing = new ArrayList<>();
        for (String module : List.of("collective-core", "ipc", "arrow-bridge", "spark-plugin")) {
            try (Stream<Path> files = Files.walk(root.resolve(module).resolve("src/main/java"))) {
                for (Path file : (Iterable<Path>) files.filter(f -> f.toString().endsWith(".java"))::iterator) {
                    String source = Files.readString(file);
                    if (file.endsWith("JdkAccess.java") || !USES_AGRONA_MEMORY.matcher(withoutComments(source)).find()) {
                        continue;
                    }
                    users.add(file);
                    Matcher type = TYPE_DECLARATION.matcher(source);
                    if (!type.find() || !source.startsWith(GATE, type.end())) {
                        missing.add(root.relativize(file).toString());
                    }
                }
            }
        }
        assertTrue(users.size() >= 20, "found only " + users.size() + " classes using Agrona: is the scan broken?");
        assertEquals(List.of(), missing, "these classes use Agrona's memory access but do not start with\n" + GATE
                + " }\n(put it first in the class body, before any static field)");
    }

    private static String withoutComments(String source) {
        return source.replaceAll("(?s)/\\*.*?\\*/", "").replaceAll("//[^\\n]*", "");
    }
}
