package org.sparkccl.tools.build;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import javax.xml.parsers.DocumentBuilderFactory;
import org.w3c.dom.Document;
import org.w3c.dom.Element;
import org.w3c.dom.Node;

/**
 * The build's modules (from the parent pom, in its order) and their main Java sources, read as text
 * for the build tests: what a class names in code, with comments and string literals left out.
 */
final class ModuleSources {
    /** Qualified names the build tests care about: the project's own and the libraries they keep apart. */
    private static final Pattern QUALIFIED_NAME = Pattern.compile(
            "(?<![\\w.$])((?:org\\.sparkccl|jcuda|org\\.apache\\.spark|org\\.apache\\.arrow)(?:\\s*\\.\\s*[\\w$]+)+)");
    private static final Pattern IMPORT = Pattern.compile(
            "^[ \\t]*import\\s+(static\\s+)?([\\w.$\\s]+?)(\\s*\\.\\s*\\*)?\\s*;", Pattern.MULTILINE);
    private static final Pattern PACKAGE = Pattern.compile("^[ \\t]*package\\s+([\\w.\\s]+?)\\s*;", Pattern.MULTILINE);

    private ModuleSources() {
    }

    /** The repository root: the tests run in tools/. */
    static Path root() {
        return Paths.get("..").toAbsolutePath().normalize();
    }

    /** The parent pom's {@code <modules>}, in order. */
    static List<String> modules() {
        List<String> modules = new ArrayList<>();
        for (Element module : children(child(pom(root().resolve("pom.xml")).getDocumentElement(), "modules"), "module")) {
            modules.add(module.getTextContent().trim());
        }
        if (modules.isEmpty()) {
            throw new IllegalStateException("no <modules> in " + root().resolve("pom.xml"));
        }
        return modules;
    }

    static Document pom(Path file) {
        try {
            return DocumentBuilderFactory.newInstance().newDocumentBuilder().parse(file.toFile());
        } catch (Exception e) {
            throw new IllegalStateException("cannot read " + file + ": " + e, e);
        }
    }

    /** The first direct child element named {@code name}, or null. */
    static Element child(Element parent, String name) {
        List<Element> found = children(parent, name);
        return found.isEmpty() ? null : found.get(0);
    }

    /** The direct child elements named {@code name} (none where {@code parent} is null). */
    static List<Element> children(Element parent, String name) {
        List<Element> found = new ArrayList<>();
        if (parent != null) {
            for (Node n = parent.getFirstChild(); n != null; n = n.getNextSibling()) {
                if (n instanceof Element && ((Element) n).getTagName().equals(name)) {
                    found.add((Element) n);
                }
            }
        }
        return found;
    }

    /** Every main Java source of {@code module} (none where it has no src/main/java). */
    static List<SourceFile> mainSources(String module) {
        Path dir = root().resolve(module).resolve("src/main/java");
        List<SourceFile> sources = new ArrayList<>();
        if (!Files.isDirectory(dir)) {
            return sources;
        }
        try (Stream<Path> files = Files.walk(dir)) {
            for (Path file : (Iterable<Path>) files.filter(f -> f.toString().endsWith(".java")).sorted()::iterator) {
                sources.add(new SourceFile(module, root().relativize(file), Files.readString(file)));
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read the sources under " + dir, e);
        }
        return sources;
    }

    /** One source file: its text, and its code with comments and string and char literals blanked. */
    static final class SourceFile {
        final String module;
        final Path path;
        final String text;
        final String code;
        final String packageName;
        /** Top-level class name, qualified (package-info for a package's comment file). */
        final String className;

        SourceFile(String module, Path path, String text) {
            this.module = module;
            this.path = path;
            this.text = text;
            this.code = withoutCommentsAndLiterals(text);
            Matcher p = PACKAGE.matcher(code);
            this.packageName = p.find() ? p.group(1).replaceAll("\\s", "") : "";
            String simpleName = path.getFileName().toString().replaceFirst("\\.java$", "");
            this.className = packageName.isEmpty() ? simpleName : packageName + "." + simpleName;
        }

        /**
         * The qualified names this file uses: its imports (a static import's member included, a
         * wildcard import as its package) and the qualified names in its code that start with
         * {@code org.sparkccl}, {@code jcuda}, {@code org.apache.spark} or {@code org.apache.arrow}.
         */
        List<String> references() {
            List<String> names = new ArrayList<>();
            Matcher imports = IMPORT.matcher(code);
            while (imports.find()) {
                names.add(imports.group(2).replaceAll("\\s", ""));
            }
            String body = IMPORT.matcher(PACKAGE.matcher(code).replaceAll("")).replaceAll("");
            Matcher qualified = QUALIFIED_NAME.matcher(body);
            while (qualified.find()) {
                names.add(qualified.group(1).replaceAll("\\s", ""));
            }
            return names;
        }

        @Override
        public String toString() {
            return path.toString();
        }
    }

    /**
     * {@code source} with every comment replaced by spaces and every string, text block and char
     * literal emptied (line breaks kept), so that a name in a comment or a message is not a use.
     */
    static String withoutCommentsAndLiterals(String source) {
        StringBuilder out = new StringBuilder(source.length());
        int i = 0;
        int n = source.length();
        while (i < n) {
            char c = source.charAt(i);
            if (source.startsWith("//", i)) {
                while (i < n && source.charAt(i) != '\n') {
                    out.append(' ');
                    i++;
                }
            } else if (source.startsWith("/*", i)) {
                int end = source.indexOf("*/", i + 2);
                end = end < 0 ? n : end + 2;
                blank(source, i, end, out);
                i = end;
            } else if (source.startsWith("\"\"\"", i)) {
                int end = closing(source, i + 3, "\"\"\"");
                out.append("\"\"\"");
                blank(source, i + 3, end - 3, out);
                out.append("\"\"\"");
                i = end;
            } else if (c == '"' || c == '\'') {
                int end = closing(source, i + 1, String.valueOf(c));
                out.append(c);
                blank(source, i + 1, end - 1, out);
                out.append(c);
                i = end;
            } else {
                out.append(c);
                i++;
            }
        }
        return out.toString();
    }

    /** The index just past the first {@code quote} from {@code from} that no backslash escapes. */
    private static int closing(String source, int from, String quote) {
        int i = from;
        while (i < source.length()) {
            if (source.charAt(i) == '\\') {
                i += 2;
            } else if (source.startsWith(quote, i)) {
                return i + quote.length();
            } else {
                i++;
            }
        }
        return source.length();
    }

    private static void blank(String source, int from, int to, StringBuilder out) {
        for (int i = from; i < to; i++) {
            out.append(source.charAt(i) == '\n' ? '\n' : ' ');
        }
    }
}
