package org.sparkccl.core.jdk;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.reflect.Field;

/**
 * Agrona 2.x reads and writes memory through {@code jdk.internal.misc.Unsafe}, which Java 17 only
 * lets code use when {@code java.base/jdk.internal.misc} is exported to it. No user should have to
 * know that flag (a Spark executor is started without it), so sparkccl adds the export itself, at
 * run time, before its first use of Agrona.
 *
 * <p>Order matters: once a class has failed to link against {@code jdk.internal.misc.Unsafe}, the
 * JVM remembers the failure for the life of the class. So every sparkccl class that touches
 * Agrona's memory access ({@code UnsafeApi}, {@code UnsafeBuffer}, {@code BufferUtil},
 * {@code IoUtil}) calls {@link #ensureAgronaAccess()} from its static initializer, and
 * {@code AgronaAccessOrderTest} checks that none forgets.
 *
 * <p>Two ways to add the export, tried in order: a private lookup into {@link Module} (works where
 * {@code java.lang} is open to us, as Spark opens it on every driver and executor), else the JDK's
 * own trusted lookup read through {@code sun.misc.Unsafe} (module {@code jdk.unsupported}, which
 * every Java 17 and 21 JVM exports), so a JVM started with no flag at all works too. If both fail,
 * the error names the flag that does it by hand.
 */
public final class JdkAccess {
    public static final String EXPORT_FLAG = "--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED";
    private static volatile boolean ensured;

    private JdkAccess() {
    }

    /** Makes sure Agrona can work in this JVM; cheap after the first call. */
    public static void ensureAgronaAccess() {
        if (ensured) {
            return;
        }
        synchronized (JdkAccess.class) {
            if (ensured) {
                return;
            }
            Module base = Object.class.getModule();
            Module agrona = org.agrona.DirectBuffer.class.getModule();
            if (!base.isExported("jdk.internal.misc", agrona)) {
                addExport(base, agrona);
            }
            ensured = true;
        }
    }

    private static void addExport(Module base, Module agrona) {
        Throwable first;
        try {
            addExport(MethodHandles.privateLookupIn(Module.class, MethodHandles.lookup()), base, agrona);
            return;
        } catch (Throwable e) {
            first = e;
        }
        try {
            addExport(trustedLookup(), base, agrona);
        } catch (Throwable e) {
            IllegalStateException failure = new IllegalStateException("sparkccl could not export jdk.internal.misc to"
                    + " Agrona in this JVM (" + e + "); start the JVM with " + EXPORT_FLAG
                    + " (for Spark executors: spark.executor.extraJavaOptions)", e);
            failure.addSuppressed(first);
            throw failure;
        }
    }

    private static void addExport(MethodHandles.Lookup lookup, Module base, Module agrona) throws Throwable {
        if (agrona.isNamed()) {
            MethodHandle add = lookup.findVirtual(Module.class, "implAddExports",
                    MethodType.methodType(void.class, String.class, Module.class));
            add.invoke(base, "jdk.internal.misc", agrona);
        } else {
            MethodHandle add = lookup.findVirtual(Module.class, "implAddExportsToAllUnnamed",
                    MethodType.methodType(void.class, String.class));
            add.invoke(base, "jdk.internal.misc");
        }
    }

    /** The JDK's {@code MethodHandles.Lookup.IMPL_LOOKUP}, read with sun.misc.Unsafe (no module is opened for it). */
    private static MethodHandles.Lookup trustedLookup() throws ReflectiveOperationException {
        Field theUnsafe = sun.misc.Unsafe.class.getDeclaredField("theUnsafe");
        theUnsafe.setAccessible(true);
        sun.misc.Unsafe unsafe = (sun.misc.Unsafe) theUnsafe.get(null);
        Field impl = MethodHandles.Lookup.class.getDeclaredField("IMPL_LOOKUP");
        return (MethodHandles.Lookup) unsafe.getObject(unsafe.staticFieldBase(impl), unsafe.staticFieldOffset(impl));
    }
}
