package org.sparkccl.core.shm;

import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Names of sparkccl segments in /dev/shm: {@code sparkccl-<pid>-<32 hex digits>}. The pid lets
 * survivors and later runs find what a dead process left behind; the 128 random bits make the name
 * unguessable, so no other user can pre-create or predict it.
 */
final class ShmSegmentName {
    static final String PREFIX = "sparkccl-";
    /** Longest possible name: prefix, 19 pid digits, dash, 32 hex digits. */
    static final int MAX_LENGTH = PREFIX.length() + 19 + 1 + 32;

    private static final int RANDOM_BYTES = 16;
    private static final Pattern PATTERN = Pattern.compile("sparkccl-([0-9]{1,19})-[0-9a-f]{32}");
    private static final SecureRandom RANDOM = new SecureRandom();

    private ShmSegmentName() {
    }

    static String newName(long pid) {
        byte[] random = new byte[RANDOM_BYTES];
        RANDOM.nextBytes(random);
        return PREFIX + pid + "-" + HexFormat.of().formatHex(random);
    }

    /** The pid in a sparkccl segment name, or -1 when {@code fileName} is not one (so it is never touched). */
    static long ownerPid(String fileName) {
        Matcher m = PATTERN.matcher(fileName);
        if (!m.matches()) {
            return -1;
        }
        try {
            return Long.parseLong(m.group(1));
        } catch (NumberFormatException e) {
            return -1;
        }
    }
}
