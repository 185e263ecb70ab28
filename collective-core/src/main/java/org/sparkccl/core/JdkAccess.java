package org.sparkccl.core;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;

/**
 * Agrona 2.x reads and writes memory through {@code jdk.internal.misc.Unsafe}, which Java 17 only
 * lets us use when {@code java.base/jdk.internal.misc} is exported to our code. Spark opens
 * {@code java.lang} to application code on every driver and executor, and with that open we can add
 * the export ourselves, so users need no extra flag; elsewhere the error says which flag to add.
 */
public final class JdkAccess {
    public static final String EXPORT_FLAG = "--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED";
    private static volatile boolean ensured;

    private JdkAccess() {
    }

    /** Makes sure Agrona can work; call before the first Agrona buffer or UnsafeApi use. */
    public static void ensureAgronaAccess() {
        if (ensured) {
            return;
        }
        synchronized (JdkAccess.class) {
            if (ensured) {
                return;
            }
            Module base = Object.class.getModule();
            Module agrona = org.agrona.UnsafeApi.class.getModule();
            if (!base.isExported("jdk.internal.misc", agrona)) {
                addExport(base, agrona);
            }
            ensured = true;
        }
    }

    private static void addExport(Module base, Module agrona) {
        try {
            MethodHandles.Lookup lookup = MethodHandles.privateLookupIn(Module.class, MethodHandles.lookup());
            if (agrona.isNamed()) {
                MethodHandle add = lookup.findVirtual(Module.class, "implAddExports",
                        MethodType.methodType(void.class, String.class, Module.class));
                add.invoke(base, "jdk.internal.misc", agrona);
            } else {
                MethodHandle add = lookup.findVirtual(Module.class, "implAddExportsToAllUnnamed",
                        MethodType.methodType(void.class, String.class));
                add.invoke(base, "jdk.internal.misc");
            }
        } catch (Throwable e) {
            throw new IllegalStateException("sparkccl needs the JVM flag " + EXPORT_FLAG
                    + " (Agrona uses jdk.internal.misc.Unsafe), or --add-opens=java.base/java.lang=ALL-UNNAMED as Spark"
                    + " sets, so that it can add the export itself: " + e, e);
        }
    }
}
