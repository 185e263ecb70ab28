package org.sparkccl.spark.ml;

/**
 * Hands a Spark ML stage its uid while its Scala superclass is still being constructed. Spark's
 * shared params ({@code featuresCol}, {@code labelCol}, ...) are created in that constructor and
 * take their owner's uid from {@code uid()} right then, before a Java subclass can assign a field;
 * a Scala class gets its uid as a constructor parameter, which is set first. So the Java
 * constructor puts the uid here in the argument of {@code this(...)}, {@code uid()} reads it from
 * here until the uid field (the class's first) has taken it.
 */
final class ConstructionUid {
    private static final ThreadLocal<String> CURRENT = new ThreadLocal<>();

    /** What a constructor passes on to the private one that does the work. */
    static final class Token {
        private Token() {
        }
    }

    private ConstructionUid() {
    }

    static Token begin(String uid) {
        if (uid == null || uid.isEmpty()) {
            throw new IllegalArgumentException("a Spark ML stage needs a non-empty uid");
        }
        CURRENT.set(uid);
        return new Token();
    }

    /** During construction: the uid being constructed with. */
    static String current() {
        return CURRENT.get();
    }

    /** The uid being constructed with, now owned by the field that takes it. */
    static String take() {
        String uid = CURRENT.get();
        CURRENT.remove();
        return uid;
    }
}
