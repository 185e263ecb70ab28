package org.sparkccl.notebooks;

import io.github.spencerpark.jupyter.kernel.BaseKernel;
import io.github.spencerpark.jupyter.kernel.LanguageInfo;
import io.github.spencerpark.jupyter.kernel.display.DisplayData;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.stream.Collectors;
import jdk.jshell.Diag;
import jdk.jshell.EvalException;
import jdk.jshell.JShell;
import jdk.jshell.Snippet;
import jdk.jshell.SnippetEvent;
import jdk.jshell.SourceCodeAnalysis;
import jdk.jshell.UnresolvedReferenceException;

/**
 * A Jupyter kernel for Java: JShell evaluates each cell, in this JVM, with this JVM's class path
 * (sparkccl, Spark, Arrow, JFreeChart). A cell that does not compile or throws fails with the
 * compiler's message or the exception's stack trace, so `nbconvert --execute` fails too.
 */
public final class JavaKernel extends BaseKernel {
    private final JShell shell;

    public JavaKernel() {
        shell = JShell.builder()
                .executionEngine(new ContextLoaderExecution(), Map.of())
                .out(System.out)
                .err(System.err)
                .build();
        // The compiler must see what the cells' classes will see at run time.
        shell.addToClasspath(System.getProperty("java.class.path"));
        Display.attach(this);
    }

    @Override
    public LanguageInfo getLanguageInfo() {
        return new LanguageInfo.Builder("Java").version(Runtime.version().toString())
                .mimetype("text/x-java-source").fileExtension(".jshell").pygments("java").codemirror("java").build();
    }

    @Override
    public DisplayData eval(String code) throws Exception {
        SourceCodeAnalysis analysis = shell.sourceCodeAnalysis();
        String rest = code;
        String lastValue = null;
        while (!rest.isBlank()) {
            SourceCodeAnalysis.CompletionInfo info = analysis.analyzeCompletion(rest);
            if (info.completeness() == SourceCodeAnalysis.Completeness.DEFINITELY_INCOMPLETE
                    || info.completeness() == SourceCodeAnalysis.Completeness.CONSIDERED_INCOMPLETE
                    && info.source() == null) {
                throw new CellException("the cell ends inside a statement (missing ';', ')' or '}'?): "
                        + rest.strip());
            }
            String source = info.source() != null ? info.source() : rest;
            lastValue = evalSnippet(source);
            rest = info.remaining() == null ? "" : info.remaining();
        }
        return lastValue == null ? null : new DisplayData(lastValue);
    }

    /** Evaluates one snippet; returns its value when it is an expression, else null. */
    private String evalSnippet(String source) throws Exception {
        String value = null;
        for (SnippetEvent event : shell.eval(source)) {
            if (event.exception() != null) {
                throw failure(event.exception());
            }
            Snippet snippet = event.snippet();
            if (event.causeSnippet() != null) {
                continue; // a dependent snippet's update, not this cell's result
            }
            switch (event.status()) {
                case REJECTED -> throw new CellException("does not compile:\n" + diagnostics(snippet));
                case RECOVERABLE_DEFINED, RECOVERABLE_NOT_DEFINED -> throw new CellException(
                        "refers to something not defined: " + shell.unresolvedDependencies((jdk.jshell.DeclarationSnippet)
                        snippet).collect(Collectors.joining(", ")) + "\n" + diagnostics(snippet));
                default -> {
                }
            }
            if (snippet.kind() == Snippet.Kind.EXPRESSION || snippet.subKind() == Snippet.SubKind.TEMP_VAR_EXPRESSION_SUBKIND) {
                value = event.value();
            }
        }
        return value;
    }

    private String diagnostics(Snippet snippet) {
        List<String> lines = new ArrayList<>();
        for (Diag d : shell.diagnostics(snippet).collect(Collectors.toList())) {
            String source = snippet.source();
            int start = (int) Math.max(0, d.getStartPosition());
            int lineStart = source.lastIndexOf('\n', Math.max(0, start - 1)) + 1;
            int lineEnd = source.indexOf('\n', start);
            String line = source.substring(lineStart, lineEnd < 0 ? source.length() : lineEnd);
            lines.add((d.isError() ? "error: " : "warning: ") + d.getMessage(Locale.ROOT) + "\n    " + line);
        }
        return String.join("\n", lines);
    }

    /** The cell's own exception, with JShell's wrapper classes and the kernel's frames cut off. */
    private static Exception failure(Exception jshellException) {
        String name = jshellException instanceof EvalException e ? e.getExceptionClassName()
                : jshellException instanceof UnresolvedReferenceException ? "unresolved reference"
                : jshellException.getClass().getName();
        StringBuilder text = new StringBuilder(name).append(": ").append(jshellException.getMessage());
        for (StackTraceElement frame : jshellException.getStackTrace()) {
            text.append("\n    at ").append(frame);
        }
        Throwable cause = jshellException.getCause();
        while (cause != null) {
            String causeName = cause instanceof EvalException e ? e.getExceptionClassName() : cause.getClass().getName();
            text.append("\nCaused by: ").append(causeName).append(": ").append(cause.getMessage());
            for (StackTraceElement frame : cause.getStackTrace()) {
                text.append("\n    at ").append(frame);
            }
            cause = cause.getCause();
        }
        return new CellException(text.toString());
    }

    @Override
    public List<String> formatError(Exception e) {
        return List.of(e.getMessage().split("\n"));
    }

    @Override
    public void interrupt() {
        shell.stop();
    }

    @Override
    public void onShutdown(boolean isRestarting) {
        shell.close();
    }
}
