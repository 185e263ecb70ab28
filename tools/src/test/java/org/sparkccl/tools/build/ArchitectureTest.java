package org.sparkccl.tools.build;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.sparkccl.tools.build.ModuleSources.SourceFile;
import org.w3c.dom.Element;

/**
 * The module map of docs/architecture.md, checked against the poms and the main sources of every
 * module the parent pom lists: dependencies point down only, no package cycle inside a module, no
 * class knows both Spark and CUDA, and collective-core's root package is the public API only.
 * Names in comments and string literals do not count; fully qualified names in code do.
 */
class ArchitectureTest {
    /**
     * The module map, bottom up, and what each module's main code (and its pom's compile and
     * runtime dependencies) may use. Test scope may point at any module below, never above.
     */
    private static final Map<String, Set<String>> MAY_USE = new LinkedHashMap<>();

    static {
        MAY_USE.put("collective-core", Set.of());
        MAY_USE.put("ipc", Set.of("collective-core"));
        MAY_USE.put("arrow-bridge", Set.of("collective-core"));
        MAY_USE.put("spark-plugin", Set.of("collective-core", "arrow-bridge"));
        MAY_USE.put("train", Set.of("collective-core", "ipc", "arrow-bridge", "spark-plugin"));
        MAY_USE.put("tools", Set.of("collective-core", "ipc", "arrow-bridge", "spark-plugin", "train"));
        MAY_USE.put("notebooks", Set.of("collective-core", "ipc", "arrow-bridge", "spark-plugin", "train", "tools"));
    }

    /** Modules a module's pom may bring onto the class path that its code must not name: found through ServiceLoader. */
    private static final Map<String, Set<String>> FOUND_AT_RUN_TIME = Map.of("spark-plugin", Set.of("ipc"));

    /** Libraries (package prefixes) a module's main code must not name. */
    private static final Map<String, List<String>> MUST_NOT_NAME = Map.of(
            "collective-core", List.of("jcuda", "org.apache.spark", "org.apache.arrow"),
            "arrow-bridge", List.of("jcuda"),
            "spark-plugin", List.of("jcuda"));

    private static final String API_PACKAGE = "org.sparkccl.core";

    /** The public API: all that collective-core's root package may hold. */
    private static final Set<String> API = Set.of("Bootstrap", "BufferAddresses", "CclException",
            "CclTimeoutException", "Communicator", "DataType", "MemoryKind", "PeerFailedException", "ReduceOp",
            "SharedBuffer", "StagingBuffer", "package-info");

    private static List<String> modules;
    private static List<SourceFile> sources;
    /** Top-level main class -> its source, over every module. */
    private static Map<String, SourceFile> classes;
    /** Main package -> the module that holds it. */
    private static Map<String, String> packages;

    @BeforeAll
    static void readTheSources() {
        modules = ModuleSources.modules();
        sources = new ArrayList<>();
        classes = new HashMap<>();
        packages = new HashMap<>();
        for (String module : modules) {
            for (SourceFile source : ModuleSources.mainSources(module)) {
                sources.add(source);
                classes.put(source.className, source);
                packages.put(source.packageName, module);
            }
        }
        assertTrue(sources.size() > 200, "found only " + sources.size() + " main sources: is the scan broken?");
    }

    @Test
    void theMapNamesEveryModuleInBuildOrder() {
        assertEquals(List.copyOf(MAY_USE.keySet()), modules,
                "the parent pom's modules and ArchitectureTest.MAY_USE differ: put a new module into the map"
                        + " (and docs/architecture.md), in the parent pom's order, which is bottom up");
        MAY_USE.forEach((module, used) -> used.forEach(u -> assertTrue(below(u, module),
                "ArchitectureTest.MAY_USE lets " + module + " use " + u + ", which is not below it")));
    }

    @Test
    void pomsDependOnModulesBelowOnly() {
        List<String> wrong = new ArrayList<>();
        Map<String, String> moduleOfArtifact = new HashMap<>();
        for (String module : modules) {
            moduleOfArtifact.put(text(ModuleSources.pom(pomOf(module)).getDocumentElement(), "artifactId"), module);
        }
        for (String module : modules) {
            Element project = ModuleSources.pom(pomOf(module)).getDocumentElement();
            for (Element dependency : ModuleSources.children(ModuleSources.child(project, "dependencies"), "dependency")) {
                String target = moduleOfArtifact.get(text(dependency, "artifactId"));
                String group = text(dependency, "groupId");
                if (target == null || !(group.equals("org.sparkccl") || group.equals("${project.groupId}"))) {
                    continue;
                }
                String scope = text(dependency, "scope").isEmpty() ? "compile" : text(dependency, "scope");
                if (scope.equals("test")) {
                    if (!below(target, module)) {
                        wrong.add(module + "/pom.xml: test dependency on " + target + ", which is not below " + module);
                    }
                } else if (!MAY_USE.get(module).contains(target)
                        && !FOUND_AT_RUN_TIME.getOrDefault(module, Set.of()).contains(target)) {
                    wrong.add(module + "/pom.xml: " + scope + " dependency on " + target + "; " + module
                            + "'s main code may use only " + new TreeSet<>(MAY_USE.get(module)));
                }
            }
        }
        assertEquals(List.of(), wrong, "dependencies must point down the module map (docs/architecture.md, Modules)");
    }

    @Test
    void mainCodeNamesModulesBelowOnly() {
        List<String> wrong = new ArrayList<>();
        for (SourceFile source : sources) {
            Set<String> allowed = MAY_USE.get(source.module);
            Set<String> atRunTime = FOUND_AT_RUN_TIME.getOrDefault(source.module, Set.of());
            for (String name : source.references()) {
                String target = moduleOf(name);
                // A module found at run time is checked on its own, below.
                if (target != null && !target.equals(source.module) && !allowed.contains(target) && !atRunTime.contains(target)) {
                    wrong.add(source + ": " + name + " (" + target + ", "
                            + (below(source.module, target) ? "above " : "beside ") + source.module + ")");
                }
            }
        }
        assertEquals(List.of(), wrong, "main code may name only the modules below its own (ArchitectureTest.MAY_USE)");
    }

    /**
     * spark-plugin reaches the GPU engine through ServiceLoader ({@code core.engine.GpuEngineProvider}),
     * so a CPU-only user needs no JCuda.
     */
    @Test
    void sparkPluginFindsTheGpuEngineThroughServiceLoader() {
        List<String> wrong = new ArrayList<>();
        for (SourceFile source : sources) {
            for (String module : FOUND_AT_RUN_TIME.getOrDefault(source.module, Set.of())) {
                for (String name : source.references()) {
                    if (module.equals(moduleOf(name))) {
                        wrong.add(source + ": " + name);
                    }
                }
            }
        }
        assertEquals(List.of(), wrong, "these classes name a module their own finds at run time through"
                + " ServiceLoader (ArchitectureTest.FOUND_AT_RUN_TIME): go through the service interface instead");
    }

    @Test
    void modulesNameNoLibraryTheyMustNotKnow() {
        List<String> wrong = new ArrayList<>();
        for (SourceFile source : sources) {
            for (String library : MUST_NOT_NAME.getOrDefault(source.module, List.of())) {
                for (String name : source.references()) {
                    if (name.equals(library) || name.startsWith(library + ".")) {
                        wrong.add(source + ": " + name);
                    }
                }
            }
        }
        assertEquals(List.of(), wrong, "collective-core knows no CUDA, Spark or Arrow, arrow-bridge and spark-plugin"
                + " no CUDA (CUDA lives in ipc; ArchitectureTest.MUST_NOT_NAME)");
    }

    @Test
    void noClassKnowsBothSparkAndCuda() {
        List<String> wrong = new ArrayList<>();
        for (SourceFile source : sources) {
            String spark = null;
            String cuda = null;
            for (String name : source.references()) {
                spark = spark == null && name.startsWith("org.apache.spark.") ? name : spark;
                cuda = cuda == null && name.startsWith("jcuda.") ? name : cuda;
            }
            if (spark != null && cuda != null) {
                wrong.add(source + ": " + spark + " and " + cuda);
            }
        }
        assertEquals(List.of(), wrong, "no class knows both Spark and CUDA: split it, Spark's side in spark-plugin"
                + " (or train), CUDA's in ipc");
    }

    @Test
    void noPackageCycleInsideAModule() {
        List<String> cycles = new ArrayList<>();
        for (String module : modules) {
            // package -> package it uses -> the first file and name that make the edge
            Map<String, Map<String, String>> edges = new TreeMap<>();
            for (SourceFile source : sources) {
                if (!source.module.equals(module)) {
                    continue;
                }
                Map<String, String> out = edges.computeIfAbsent(source.packageName, p -> new TreeMap<>());
                for (String name : source.references()) {
                    String target = packageOf(name);
                    if (target != null && module.equals(packages.get(target)) && !target.equals(source.packageName)) {
                        out.putIfAbsent(target, source + ": " + name);
                    }
                }
            }
            for (List<String> cycle : new StronglyConnected(edges).components()) {
                StringBuilder message = new StringBuilder(module + ": packages " + cycle + " use each other:");
                for (String from : cycle) {
                    edges.get(from).forEach((to, why) -> {
                        if (cycle.contains(to)) {
                            message.append("\n    ").append(from).append(" -> ").append(to).append(", e.g. ").append(why);
                        }
                    });
                }
                cycles.add(message.toString());
            }
        }
        assertEquals(List.of(), cycles, "package cycles: move the shared piece into one package (or a new one"
                + " below both)");
    }

    @Test
    void coreRootPackageHoldsTheApiOnly() {
        List<String> wrong = new ArrayList<>();
        for (SourceFile source : sources) {
            String simpleName = source.className.substring(source.className.lastIndexOf('.') + 1);
            if (source.packageName.equals(API_PACKAGE) && !API.contains(simpleName)) {
                wrong.add(source.toString());
            }
        }
        assertEquals(List.of(), wrong, API_PACKAGE + " is the public API only (ArchitectureTest.API): engine code"
                + " belongs in its subpackage (shm, net, bootstrap, memory, os, engine, proto, ring, ...; see"
                + " docs/architecture.md, Packages); a new API type goes into ArchitectureTest.API too");
    }

    /** The module of the main class or package {@code name} names (or a member of one), or null. */
    private static String moduleOf(String name) {
        SourceFile source = classOf(name);
        if (source != null) {
            return source.module;
        }
        String pkg = longestPrefix(name, packages.keySet());
        return pkg == null ? null : packages.get(pkg);
    }

    /** The main package {@code name} lies in, or null where it names nothing of the main sources. */
    private static String packageOf(String name) {
        SourceFile source = classOf(name);
        return source != null ? source.packageName : longestPrefix(name, packages.keySet());
    }

    /** The top-level main class that {@code name} is or lies in (a nested class, a static member). */
    private static SourceFile classOf(String name) {
        String cls = longestPrefix(name, classes.keySet());
        return cls == null ? null : classes.get(cls);
    }

    private static String longestPrefix(String name, Set<String> candidates) {
        for (String prefix = name; ; prefix = prefix.substring(0, prefix.lastIndexOf('.'))) {
            if (candidates.contains(prefix)) {
                return prefix;
            }
            if (prefix.indexOf('.') < 0) {
                return null;
            }
        }
    }

    private static boolean below(String lower, String upper) {
        return modules.indexOf(lower) < modules.indexOf(upper);
    }

    private static Path pomOf(String module) {
        return ModuleSources.root().resolve(module).resolve("pom.xml");
    }

    private static String text(Element parent, String name) {
        Element child = ModuleSources.child(parent, name);
        return child == null ? "" : child.getTextContent().trim();
    }

    /** Tarjan's strongly connected components of more than one node. */
    private static final class StronglyConnected {
        private final Map<String, Map<String, String>> edges;
        private final Map<String, Integer> index = new HashMap<>();
        private final Map<String, Integer> lowLink = new HashMap<>();
        private final Deque<String> stack = new ArrayDeque<>();
        private final List<List<String>> components = new ArrayList<>();

        StronglyConnected(Map<String, Map<String, String>> edges) {
            this.edges = edges;
        }

        List<List<String>> components() {
            for (String node : edges.keySet()) {
                if (!index.containsKey(node)) {
                    visit(node);
                }
            }
            return components;
        }

        private void visit(String node) {
            index.put(node, index.size());
            lowLink.put(node, index.get(node));
            stack.push(node);
            for (String next : edges.getOrDefault(node, Map.of()).keySet()) {
                if (!index.containsKey(next)) {
                    visit(next);
                    lowLink.put(node, Math.min(lowLink.get(node), lowLink.get(next)));
                } else if (stack.contains(next)) {
                    lowLink.put(node, Math.min(lowLink.get(node), index.get(next)));
                }
            }
            if (lowLink.get(node).equals(index.get(node))) {
                List<String> component = new ArrayList<>();
                String member;
                do {
                    member = stack.pop();
                    component.add(member);
                } while (!member.equals(node));
                if (component.size() > 1) {
                    component.sort(null);
                    components.add(component);
                }
            }
        }
    }
}
