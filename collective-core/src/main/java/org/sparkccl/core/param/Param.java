package org.sparkccl.core.param;

import java.util.Locale;
import java.util.Objects;
import java.util.function.Function;

/**
 * One typed parameter. It is read, in rising priority, from its default, the environment variable
 * {@code SPARKCCL_<NAME>}, the system property {@code sparkccl.<confName>}, and explicit overrides
 * (Spark passes {@code spark.sparkccl.<confName>} settings that way).
 */
public final class Param<T> {
    private final String name;
    private final String confName;
    private final T defaultValue;
    private final String description;
    private final Function<String, T> parser;

    Param(String name, T defaultValue, String description, Function<String, T> parser) {
        this.name = Objects.requireNonNull(name);
        this.confName = camel(name);
        this.defaultValue = defaultValue;
        this.description = description;
        this.parser = parser;
    }

    /** Upper-case name, e.g. {@code TIMEOUT_MS}. */
    public String name() {
        return name;
    }

    /** {@code SPARKCCL_TIMEOUT_MS}. */
    public String envName() {
        return "SPARKCCL_" + name;
    }

    /** Camel-case name, e.g. {@code timeoutMs}: {@code spark.sparkccl.timeoutMs}, {@code -Dsparkccl.timeoutMs}. */
    public String confName() {
        return confName;
    }

    public String sparkConfKey() {
        return "spark.sparkccl." + confName;
    }

    public T defaultValue() {
        return defaultValue;
    }

    public String description() {
        return description;
    }

    T parse(String text, String source) {
        try {
            return parser.apply(text.trim());
        } catch (RuntimeException e) {
            throw new IllegalArgumentException("bad value '" + text + "' for " + name + " (from " + source + "): "
                    + e.getMessage() + "; " + description, e);
        }
    }

    static String camel(String upperSnake) {
        StringBuilder b = new StringBuilder();
        boolean up = false;
        for (char c : upperSnake.toLowerCase(Locale.ROOT).toCharArray()) {
            if (c == '_') {
                up = true;
            } else {
                b.append(up ? Character.toUpperCase(c) : c);
                up = false;
            }
        }
        return b.toString();
    }

    @Override
    public String toString() {
        return envName();
    }
}
