package org.sparkccl.ipc.cuda;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import jcuda.driver.JCudaDriver;

/**
 * Loads JCuda's driver binding without the race that killed a JVM on the GPU machine: JCuda copies
 * its native library into {@code java.io.tmpdir} under a fixed name and loads whatever file is
 * there, so a second JVM starting at the same moment can load a half-written copy (SIGBUS). Here
 * the library is written under a unique name and moved into place atomically, in a folder of our
 * own, and JCuda is pointed at that folder while it initializes; it then finds a complete file.
 */
final class JCudaLoader {
    static final String LIBRARY = "libJCudaDriver-12.0.0-linux-x86_64.so";
    private static boolean loaded;

    private JCudaLoader() {
    }

    static synchronized void load() {
        if (loaded) {
            return;
        }
        String tmp = System.getProperty("java.io.tmpdir");
        Path dir = Paths.get(tmp, "sparkccl-jcuda-" + System.getProperty("user.name", "user"));
        try {
            extract(dir);
        } catch (IOException e) {
            throw new IllegalStateException("could not extract JCuda's native library into " + dir + ": " + e, e);
        }
        // JCuda reads java.io.tmpdir at load time only; put it back right after.
        System.setProperty("java.io.tmpdir", dir.toString());
        try {
            JCudaDriver.setExceptionsEnabled(false);
        } finally {
            System.setProperty("java.io.tmpdir", tmp);
        }
        loaded = true;
    }

    private static void extract(Path dir) throws IOException {
        Files.createDirectories(dir);
        Path target = dir.resolve(LIBRARY);
        try (InputStream in = JCudaDriver.class.getResourceAsStream("/lib/" + LIBRARY)) {
            if (in == null) {
                throw new IOException("jcuda-natives (linux-x86_64) is not on the class path: /lib/" + LIBRARY + " missing");
            }
            byte[] bytes = in.readAllBytes();
            if (Files.isRegularFile(target) && Files.size(target) == bytes.length) {
                return;
            }
            Path partial = Files.createTempFile(dir, "part-", ".so");
            try {
                Files.write(partial, bytes);
                try {
                    Files.move(partial, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
                } catch (AtomicMoveNotSupportedException e) {
                    Files.move(partial, target, StandardCopyOption.REPLACE_EXISTING);
                }
            } finally {
                Files.deleteIfExists(partial);
            }
        }
    }
}
