package org.sparkccl.notebooks;

import io.github.spencerpark.jupyter.channels.JupyterConnection;
import io.github.spencerpark.jupyter.kernel.KernelConnectionProperties;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.logging.Level;
import java.util.logging.Logger;

/** What Jupyter starts (kernel.json's argv): {@code KernelMain CONNECTION_FILE}. */
public final class KernelMain {
    private KernelMain() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: KernelMain CONNECTION_FILE (Jupyter passes it; install the kernel with "
                    + "bin/notebook-kernel install)");
            System.exit(2);
        }
        // The kernel library logs every message at INFO through java.util.logging, under names
        // like "ShellChannel": only warnings, or every nbconvert log fills with them.
        Logger.getLogger("").setLevel(Level.WARNING);
        KernelConnectionProperties properties = KernelConnectionProperties.parse(Files.readString(Path.of(args[0])));
        JupyterConnection connection = new JupyterConnection(properties);
        JavaKernel kernel = new JavaKernel();
        kernel.becomeHandlerForConnection(connection);
        connection.connect();
        connection.waitUntilClose();
        // Spark's and sparkccl's non-daemon threads must not keep a closed kernel alive.
        System.exit(0);
    }
}
