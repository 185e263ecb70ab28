package org.sparkccl.tools.build;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.MemoryKind;
import org.sparkccl.core.check.CollectiveCheck;
import org.sparkccl.tools.build.ModuleSources.SourceFile;

/**
 * A collective added to {@link Communicator} must reach every engine and the shared check: each
 * class of the main sources that implements Communicator (the engines and spark-plugin's
 * MeteredCommunicator, found by reading the sources, so a new engine is covered too) declares it
 * itself, and {@link CollectiveCheck}, which the thread, multi-process and Spark tests run on every
 * engine, calls it. The collectives are Communicator's abstract methods that return nothing,
 * {@code close} aside.
 */
class CollectivesEverywhereTest {
    private static final Pattern IMPLEMENTS_COMMUNICATOR = Pattern.compile(
            "\\b(?:class|enum|record)\\s+(\\w+)[^{;]*?\\bimplements\\s[^{;]*?\\bCommunicator\\b");

    @Test
    void everyEngineDeclaresEveryCollective() throws ClassNotFoundException {
        List<Method> collectives = collectives();
        List<Class<?>> engines = engines();
        assertTrue(engines.size() >= 6, "found only " + engines + " implementing Communicator: is the scan broken?");
        List<String> missing = new ArrayList<>();
        for (Class<?> engine : engines) {
            for (Method collective : collectives) {
                try {
                    Method declared = engine.getDeclaredMethod(collective.getName(), collective.getParameterTypes());
                    if (Modifier.isAbstract(declared.getModifiers())) {
                        missing.add(engine.getName() + " leaves " + collective.getName() + " abstract");
                    }
                } catch (NoSuchMethodException e) {
                    missing.add(engine.getName() + " does not declare " + signature(collective));
                }
            }
        }
        assertEquals(List.of(), missing, "every engine (and the wrapper MeteredCommunicator) implements every"
                + " collective itself (docs/architecture.md, Where to change what: a collective)");
    }

    @Test
    void theSharedCheckCallsEveryCollective() {
        Set<String> called = new TreeSet<>();
        Communicator recorder = (Communicator) Proxy.newProxyInstance(getClass().getClassLoader(),
                new Class<?>[] {Communicator.class}, (proxy, method, args) -> {
                    switch (method.getName()) {
                        case "rank": return 0;
                        case "size": return 1;
                        case "memoryKind": return MemoryKind.HOST;
                        case "hashCode": return System.identityHashCode(proxy);
                        case "equals": return proxy == args[0];
                        case "toString": return "a communicator that records the calls";
                        default:
                            called.add(method.getName());
                            return null;
                    }
                });
        new CollectiveCheck(1, null).runAll(recorder, new long[] {1}, 1);
        Set<String> notCalled = new TreeSet<>();
        for (Method collective : collectives()) {
            if (!called.contains(collective.getName())) {
                notCalled.add(collective.getName());
            }
        }
        assertEquals(Set.of(), notCalled, "CollectiveCheck.runAll does not call these collectives: add each to it,"
                + " checked against ReferenceCheck, so that every engine's tests run it");
    }

    /** Communicator's abstract methods that return nothing, close aside. */
    private static List<Method> collectives() {
        List<Method> collectives = new ArrayList<>();
        for (Method m : Communicator.class.getDeclaredMethods()) {
            if (Modifier.isAbstract(m.getModifiers()) && m.getReturnType() == void.class && !m.getName().equals("close")) {
                collectives.add(m);
            }
        }
        collectives.sort((a, b) -> a.getName().compareTo(b.getName()));
        assertTrue(collectives.size() >= 5, "found only " + collectives + " collectives in Communicator");
        return collectives;
    }

    /** The main classes of every module whose code says they implement Communicator. */
    private static List<Class<?>> engines() throws ClassNotFoundException {
        List<Class<?>> engines = new ArrayList<>();
        for (String module : ModuleSources.modules()) {
            for (SourceFile source : ModuleSources.mainSources(module)) {
                Matcher m = IMPLEMENTS_COMMUNICATOR.matcher(source.code);
                while (m.find()) {
                    String topLevel = source.className.substring(source.className.lastIndexOf('.') + 1);
                    String name = m.group(1).equals(topLevel) ? source.className : source.className + "$" + m.group(1);
                    Class<?> engine = Class.forName(name, false, CollectivesEverywhereTest.class.getClassLoader());
                    assertTrue(Communicator.class.isAssignableFrom(engine), source + ": " + name
                            + " implements another Communicator than org.sparkccl.core.Communicator?");
                    engines.add(engine);
                }
            }
        }
        return engines;
    }

    private static String signature(Method m) {
        return m.getName() + Arrays.toString(Arrays.stream(m.getParameterTypes()).map(Class::getSimpleName).toArray());
    }
}
