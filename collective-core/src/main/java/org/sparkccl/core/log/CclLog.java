package org.sparkccl.core.log;

import java.util.EnumSet;
import java.util.Locale;
import org.sparkccl.core.param.Params;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Subsystem logging in NCCL's style, through SLF4J so that it lands in Spark's logs.
 * {@code SPARKCCL_DEBUG} picks the level (WARN, INFO, TRACE) and {@code SPARKCCL_DEBUG_SUBSYS}
 * the subsystems. Lines read {@code [rank 2] INIT Ring 00 : 0 -> 1 -> 2 -> 0}. Warnings are
 * always logged; INFO and TRACE lines go out at SLF4J's INFO level once sparkccl's own gate lets
 * them through, so that setting SPARKCCL_DEBUG=INFO is enough to see them.
 */
public final class CclLog {
    private static final Logger LOG = LoggerFactory.getLogger("org.sparkccl");

    private final int rank;
    private final int level; // 0 WARN, 1 INFO, 2 TRACE
    private final EnumSet<Subsys> subsystems;

    public CclLog(int rank, Params params) {
        this.rank = rank;
        String debug = params.get(Params.DEBUG);
        this.level = "TRACE".equals(debug) ? 2 : "INFO".equals(debug) ? 1 : 0;
        this.subsystems = parseSubsystems(params.get(Params.DEBUG_SUBSYS));
    }

    static EnumSet<Subsys> parseSubsystems(String spec) {
        String s = spec.trim().toUpperCase(Locale.ROOT);
        boolean exclude = s.startsWith("^");
        if (exclude) {
            s = s.substring(1);
        }
        EnumSet<Subsys> named = EnumSet.noneOf(Subsys.class);
        for (String part : s.split(",")) {
            String p = part.trim();
            if (p.isEmpty()) {
                continue;
            }
            if (p.equals("ALL")) {
                named = EnumSet.allOf(Subsys.class);
            } else {
                named.add(Subsys.valueOf(p));
            }
        }
        return exclude ? EnumSet.complementOf(named) : named;
    }

    public boolean infoEnabled(Subsys subsys) {
        return level >= 1 && subsystems.contains(subsys);
    }

    public boolean traceEnabled(Subsys subsys) {
        return level >= 2 && subsystems.contains(subsys);
    }

    public void info(Subsys subsys, String format, Object... args) {
        if (infoEnabled(subsys)) {
            LOG.info(prefix(subsys) + String.format(Locale.ROOT, format, args));
        }
    }

    public void trace(Subsys subsys, String format, Object... args) {
        if (traceEnabled(subsys)) {
            LOG.info(prefix(subsys) + "TRACE " + String.format(Locale.ROOT, format, args));
        }
    }

    public void warn(Subsys subsys, String format, Object... args) {
        LOG.warn(prefix(subsys) + String.format(Locale.ROOT, format, args));
    }

    private String prefix(Subsys subsys) {
        return "[rank " + rank + "] " + subsys + " ";
    }
}
