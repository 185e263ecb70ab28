package org.sparkccl.notebooks;

import com.google.gson.GsonBuilder;
import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Writes the kernelspec (a folder with kernel.json) that starts {@link KernelMain}: this JVM's
 * java, exactly the JVM options Spark gives its driver and executors (scripts/spark-jvm-options),
 * and the class path Maven wrote for this module.
 *
 * <p>{@code KernelSpec DIR CLASSPATH_FILE CLASSES_DIR JVM_OPTIONS_FILE}; bin/notebook-kernel then
 * hands DIR to {@code jupyter kernelspec install}.
 */
public final class KernelSpec {
    /** The kernel's name in notebooks' metadata and for {@code --ExecutePreprocessor.kernel_name}. */
    public static final String NAME = "sparkccl-java";

    private KernelSpec() {
    }

    public static void main(String[] args) throws IOException {
        if (args.length != 4) {
            System.err.println("usage: KernelSpec DIR CLASSPATH_FILE CLASSES_DIR JVM_OPTIONS_FILE");
            System.exit(2);
        }
        Path dir = write(Path.of(args[0]), Path.of(args[1]), Path.of(args[2]), Path.of(args[3]));
        System.out.println(dir);
    }

    /** Writes DIR/sparkccl-java/kernel.json and returns that folder. */
    public static Path write(Path dir, Path classPathFile, Path classesDir, Path jvmOptionsFile) throws IOException {
        if (!Files.isRegularFile(classPathFile)) {
            throw new IOException(classPathFile + " is missing: build the module first "
                    + "(mvn -o -B -pl notebooks -am package -DskipTests)");
        }
        String classPath = classesDir.toAbsolutePath() + File.pathSeparator + Files.readString(classPathFile).strip();
        List<String> argv = new ArrayList<>();
        argv.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        for (String line : Files.readAllLines(jvmOptionsFile)) {
            if (!line.isBlank()) {
                argv.add(line.strip());
            }
        }
        argv.add("-cp");
        argv.add(classPath);
        argv.add(KernelMain.class.getName());
        argv.add("{connection_file}");

        Map<String, Object> spec = new LinkedHashMap<>();
        spec.put("argv", argv);
        spec.put("display_name", "Java (sparkccl)");
        spec.put("language", "java");
        spec.put("interrupt_mode", "message");
        Path kernelDir = dir.resolve(NAME);
        Files.createDirectories(kernelDir);
        Files.writeString(kernelDir.resolve("kernel.json"), new GsonBuilder().setPrettyPrinting().disableHtmlEscaping().create().toJson(spec));
        return kernelDir;
    }
}
