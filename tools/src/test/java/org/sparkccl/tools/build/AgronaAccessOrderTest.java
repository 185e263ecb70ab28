package org.sparkccl.tools.build;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.sparkccl.tools.build.ModuleSources.SourceFile;

/**
 * Every main class of every module (the parent pom's list) that touches Agrona's memory access
 * must add the JDK export in its static initializer, before its own static fields (see
 * {@code JdkAccess}): a class that reaches Agrona first fails to link for the life of the JVM, as
 * every Spark executor on GPUs once did. This reads the sources, so it also covers code no CPU test
 * runs (the GPU engine).
 */
class AgronaAccessOrderTest {
    private static final Pattern USES_AGRONA_MEMORY = Pattern.compile("\\b(UnsafeApi|UnsafeBuffer|BufferUtil|IoUtil)\\b");
    private static final Pattern TYPE_DECLARATION = Pattern.compile(
            "^(public )?(final )?(abstract )?(class|enum) \\w+[^{]*\\{\\n", Pattern.MULTILINE);
    private static final String GATE = "    static {\n        JdkAccess.ensureAgronaAccess();";

    @Test
    void everyClassThatTouchesAgronaAddsTheExportFirst() {
        List<String> users = new ArrayList<>();
        List<String> missing = new ArrayList<>();
        for (String module : ModuleSources.modules()) {
            for (SourceFile source : ModuleSources.mainSources(module)) {
                if (source.path.endsWith("JdkAccess.java") || !USES_AGRONA_MEMORY.matcher(source.code).find()) {
                    continue;
                }
                users.add(source.toString());
                Matcher type = TYPE_DECLARATION.matcher(source.text);
                if (!type.find() || !source.text.startsWith(GATE, type.end())) {
                    missing.add(source.toString());
                }
            }
        }
        assertTrue(users.size() >= 20, "found only " + users.size() + " classes using Agrona: is the scan broken?");
        assertEquals(List.of(), missing, "these classes use Agrona's memory access but do not start with\n" + GATE
                + " }\n(put it first in the class body, before any static field)");
    }
}
