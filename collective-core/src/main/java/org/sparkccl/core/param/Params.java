package org.sparkccl.core.param;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Function;

/**
 * The registry of every sparkccl parameter, and an immutable snapshot of their values. Build one
 * with {@link #fromEnvironment()} (environment, then system properties) and add explicit settings
 * with {@link #withOverrides(Map)}.
 */
public final class Params {
    private static final List<Param<?>> ALL = new ArrayList<>();

    public static final Param<String> DEBUG = define("DEBUG", "WARN",
            "log level: WARN, INFO or TRACE", s -> oneOf(s.toUpperCase(Locale.ROOT), "WARN", "INFO", "TRACE", "VERSION"));
    public static final Param<String> DEBUG_SUBSYS = define("DEBUG_SUBSYS", "ALL",
            "comma-separated subsystems to log: INIT, GRAPH, TUNING, P2P, SHM, NET, COLL, ALL; ^ in front excludes",
            s -> s.toUpperCase(Locale.ROOT));
    public static final Param<String> ALGO = define("ALGO", "auto",
            "all-reduce algorithm: Ring, OneShot (every rank reads every input and reduces it itself, up to"
                    + " ONESHOT_THRESHOLD bytes), Direct (buffers from allocateShared on every rank: the ranks reduce"
                    + " chunks straight from the peers' buffers, at every size; other buffers as auto) or auto"
                    + " (one-shot for small LL messages, direct for shared buffers from DIRECT_THRESHOLD on, ring"
                    + " otherwise)",
            s -> oneOfIgnoringCase(s, "auto", "Ring", "OneShot", "Direct"));
    public static final Param<String> PROTO = define("PROTO", "auto",
            "protocol: LL, Simple, LL128 (GPU engine only, where every hop of the ring is NVLink or within one GPU)"
                    + " or auto (the tuner chooses by size)", s -> s);
    public static final Param<String> TOPO_FILE = define("TOPO_FILE", "",
            "topology file to use instead of reading sysfs", s -> s);
    public static final Param<Boolean> P2P_DISABLE = define("P2P_DISABLE", false,
            "1 disables GPU peer-to-peer (CUDA IPC) transports; GPUs then stage through host memory",
            Params::parseBoolean);
    public static final Param<Boolean> CUMEM_ENABLE = define("CUMEM_ENABLE", true,
            "1 allocates the GPU windows that peer processes map with CUDA's virtual memory API (cuMemCreate) and"
                    + " hands them over as file descriptors (a Unix socket, SCM_RIGHTS), as NCCL_CUMEM_ENABLE does: a"
                    + " peer's mapping then holds the memory, so a window stays mapped in its peers after its owner"
                    + " dies; 0, or a GPU without POSIX file descriptor handles, shares them through CUDA IPC"
                    + " (cuIpcGetMemHandle)", Params::parseBoolean);
    public static final Param<String> RESIDENT = define("RESIDENT", "auto",
            "1 keeps a resident kernel per GPU rank for small one-shot all-reduces (no kernel launch per call; it"
                    + " ends after 2 ms without calls); 0 launches a kernel for every call; auto: 1 where this process"
                    + " holds only one rank of the communicator, or all of its ranks share one GPU", s -> oneOfIgnoringCase(s, "auto", "0", "1"));
    public static final Param<Integer> RESIDENT_THREADS = define("RESIDENT_THREADS", 512,
            "threads of the resident kernels' block (a multiple of 32, 64 to 512): every small call's lines are"
                    + " spread over them, so fewer threads start a call's push sooner but carry more lines each",
            Params::parseResidentThreads);
    public static final Param<Long> RESIDENT_MAX_BYTES = define("RESIDENT_MAX_BYTES", 32L << 10,
            "the largest all-reduce in bytes that the resident kernels take (one block does the whole call); larger"
                    + " one-shot calls launch a kernel of several blocks", Params::parseSize);
    /** The largest PDL_MAX_BLOCKS: the one-shot kernels let the next launch early only up to this many blocks (dev_comm.cuh). */
    public static final int PDL_MAX_BLOCKS_LIMIT = 16;
    public static final Param<Integer> PDL_MAX_BLOCKS = define("PDL_MAX_BLOCKS", 16,
            "one-shot all-reduce kernels of at most this many blocks (16: up to 128 KB) are launched with programmatic"
                    + " dependent launch where the GPU has it (sm_90 and up): the next one starts while the one before"
                    + " it on the stream ends, which takes the launch latency off small stream-ordered and CUDA-graph"
                    + " calls; 0 launches every kernel plainly", Params::parsePdlMaxBlocks);
    public static final Param<String> STREAM_LAUNCH = define("STREAM_LAUNCH", "kernel",
            "how a stream-ordered collective is queued on the caller's stream (outside a CUDA graph capture, which"
                    + " always records a kernel launch): kernel launches its kernel; graph rewrites the kernel node of"
                    + " one CUDA graph kept per communicator and launches the graph, which costs the host less per"
                    + " call (docs/perf/gpu-allreduce.md)", s -> oneOfIgnoringCase(s, "kernel", "graph"));
    public static final Param<String> STREAM_RESIDENT = define("STREAM_RESIDENT", "0",
            "1 lets a second resident kernel per GPU rank take small stream-ordered one-shot all-reduces from the"
                    + " caller's stream (one cuStreamBatchMemOp per call instead of a kernel launch; not inside a CUDA"
                    + " graph capture, where calls are launched as before); 0 (the default: on one H200 it measured no"
                    + " faster than launches, docs/perf/gpu-allreduce.md) launches a kernel for every call; auto: 1"
                    + " where the blocking resident kernel is used and no process holds two ranks on one GPU (two"
                    + " ranks' streams of one context can share a hardware queue, where one rank's wait would hold"
                    + " its peer's doorbell)", s -> oneOfIgnoringCase(s, "auto", "0", "1"));
    public static final Param<Boolean> PROBE = define("PROBE", false,
            "1 makes the GPU engine's one-shot all-reduces record GPU timestamps at fixed points of each call"
                    + " (start, input pushed, peer's input seen, header done, end) for GpuAllReduceBench's breakdown"
                    + " (docs/perf/gpu-allreduce.md); costs a few stores per call", Params::parseBoolean);
    public static final Param<Boolean> SHM_DISABLE = define("SHM_DISABLE", false,
            "1 disables the shared-memory transport", Params::parseBoolean);
    public static final Param<String> HOST_ID = define("HOST_ID", "",
            "this process's host id, instead of host name and kernel boot id: ranks with different ids are taken to"
                    + " be on different machines (sockets between them, never shared memory). Set per executor (the"
                    + " worker's environment) to pretend that executors of one machine are on several", s -> s.trim());
    public static final Param<Integer> SOCKET_CONNECTIONS = define("SOCKET_CONNECTIONS", 2,
            "TCP connections per ring neighbour for the socket transport; steps go round them, so several fill a"
                    + " link that one connection (one core's copies) cannot", Params::parsePositive);
    public static final Param<Integer> SOCKET_SPLIT = define("SOCKET_SPLIT", -1,
            "1 splits every socket-transport step of 128 KB and more into one piece per connection, sent by the"
                    + " connections' threads in parallel; 0 never does; -1 (default) does where every host has a core for"
                    + " each of its ranks and each of their connections. Must be the same on every rank", Integer::parseInt);
    public static final Param<Long> SOCKET_SMALL_BYTES = define("SOCKET_SMALL_BYTES", 64L << 10,
            "all-reduces of up to this many bytes over the socket transport go by recursive doubling (log2 n"
                    + " exchanges, as OpenMPI's small all-reduce) over direct connections that the ranks' own threads"
                    + " read and write, instead of the ring and its I/O threads; 0 never (nor with ALGO=Ring). Must be"
                    + " the same on every rank", Params::parseSize);
    public static final Param<Long> SOCKET_HALVING_BYTES = define("SOCKET_HALVING_BYTES", 1L << 20,
            "all-reduces of more than SOCKET_SMALL_BYTES and up to this many bytes over the socket transport go"
                    + " over the same direct connections by recursive halving, then doubling (Rabenseifner's: the"
                    + " ring's bytes in 2 log2 n exchanges, no I/O threads) instead of the ring; each direct"
                    + " connection then holds a receive buffer of this size; 0 never, nor where SOCKET_SMALL_BYTES is 0."
                    + " Must be the same on every rank",
            Params::parseSize);
    public static final Param<Long> SOCKET_POLL_US = define("SOCKET_POLL_US", -1L,
            "microseconds a rank polls its direct socket connections (small all-reduces) before it sleeps in the"
                    + " kernel until the bytes come; -1: 50 where the host has a core for each of its ranks, else 1000,"
                    + " yielding its core between polls",
            Long::parseLong);
    public static final Param<String> SOCKET_ADDRESS = define("SOCKET_ADDRESS", "",
            "address this rank listens on and tells its peers for the socket transport; empty: in a Spark task the"
                    + " executor's host as Spark advertises it, elsewhere the first address of an interface that is up"
                    + " and not loopback (loopback where there is none)", s -> s.trim());
    public static final Param<Boolean> NATIVE_COPY = define("NATIVE_COPY", true,
            "1 copies collective data of 32 KB and more with the C library's memcpy (through JNA), which writes"
                    + " cache lines that other cores hold without reading them first; 0 uses the JVM's copy."
                    + " Read once per JVM", Params::parseBoolean);
    public static final Param<Long> BUFFSIZE = define("BUFFSIZE", 1L << 20,
            "bytes of Simple-protocol buffer per channel and peer (split into 8 slots)", Params::parseSize);
    public static final Param<Long> LL_BUFFSIZE = define("LL_BUFFSIZE", 256L << 10,
            "bytes of LL-protocol buffer per channel and peer, flags included (split into 8 slots)", Params::parseSize);
    public static final Param<Long> LL128_BUFFSIZE = define("LL128_BUFFSIZE", 512L << 10,
            "bytes of LL128-protocol buffer per channel and peer on GPUs, flags included (split into 8 slots of"
                    + " 128-byte lines)", Params::parseSize);
    public static final Param<Long> LL128_THRESHOLD = define("LL128_THRESHOLD", -1L,
            "message size in bytes up to which the GPU tuner picks LL128 (above LL's threshold, where every hop is"
                    + " NVLink or within one GPU); -1 derives it from the cost model (GpuCostModel)", Params::parseSize);
    public static final Param<Integer> NCHANNELS = define("NCHANNELS", 0,
            "number of channels (parallel rings); 0 lets sparkccl choose", Integer::parseInt);
    public static final Param<String> RINGS = define("RINGS", "",
            "ring orders to use instead of the ring search, in NCCL_RINGS syntax: rings separated by |, ranks by"
                    + " spaces or -, e.g. '0 1 3 2|0 2 3 1'; each ring names every rank once; channel c runs ring"
                    + " c modulo the number given", s -> s);
    public static final Param<Boolean> AVOID_SLOW_LINKS = define("AVOID_SLOW_LINKS", true,
            "1 costs a PCIe link trained below its capability (not one idling at 2.5 GT/s) at the speed it runs,"
                    + " so the ring search keeps its hops off it where another order can; 0 costs every link at its"
                    + " capable speed (rings then follow the machine's shape only)", Params::parseBoolean);
    public static final Param<Integer> SPINS_BEFORE_YIELD = define("SPINS_BEFORE_YIELD", 2000,
            "busy-wait polls before a waiting rank starts to yield its core (host engine, unset: 20 where"
                    + " the host's ranks outnumber its cores)", Integer::parseInt);
    public static final Param<Integer> WARMUP_CALLS = define("WARMUP_CALLS", 20_000,
            "most small all-reduces (4 B to 8 KB) every rank of a shared-memory or socket communicator makes when it"
                    + " is built, so that a job's first calls run C2's code, not the interpreter's or C1's: rounds of 256"
                    + " until past the JVM's C2 threshold and the calls have stopped getting faster, or"
                    + " SPARKCCL_WARMUP_MS is spent (docs/perf/cpu-allreduce-notes.md); 0 none; a shared-memory communicator"
                    + " whose ranks' JVMs have all run one before skips it. Must be the same on every rank", Integer::parseInt);
    public static final Param<Long> WARMUP_MS = define("WARMUP_MS", 500L,
            "milliseconds after which a rank wants no further round of the communicator's warm-up"
                    + " (SPARKCCL_WARMUP_CALLS), by its own clock; the ranks go on while any of them wants to",
            Long::parseLong);
    public static final Param<Long> TIMEOUT_MS = define("TIMEOUT_MS", 600_000L,
            "milliseconds a collective may wait on a peer before it fails", Long::parseLong);
    public static final Param<Long> ONESHOT_THRESHOLD = define("ONESHOT_THRESHOLD", -1L,
            "all-reduce size in bytes up to which the tuner picks the one-shot algorithm (and the size of its"
                    + " slots); -1 uses the measured default, 0 turns one-shot off", Params::parseSize);
    public static final Param<Long> ONESHOT_BLOCK_BYTES = define("ONESHOT_BLOCK_BYTES", 2048L,
            "the least input of a block of a one-shot all-reduce kernel on the GPU (one thread per 8 bytes, at most"
                    + " 512 threads a block): calls of up to 16 such blocks get one block per this many bytes, larger"
                    + " ones 16 blocks up to 128 KB, then one per 8 KB", Params::parseOneShotBlockBytes);
    public static final Param<Long> DIRECT_THRESHOLD = define("DIRECT_THRESHOLD", -1L,
            "all-reduce size in bytes from which the tuner picks the direct algorithm for buffers that lie in"
                    + " shared buffers (allocateShared) on every rank; -1 uses the measured default", Params::parseSize);
    public static final Param<Long> LL_THRESHOLD = define("LL_THRESHOLD", -1L,
            "message size in bytes up to which the tuner picks LL; -1 uses the measured default", Params::parseSize);

    private final Map<Param<?>, Object> values;
    private final Map<Param<?>, String> sources;

    private Params(Map<Param<?>, Object> values, Map<Param<?>, String> sources) {
        this.values = values;
        this.sources = sources;
    }

    /** Every registered parameter, in definition order. */
    public static List<Param<?>> all() {
        return Collections.unmodifiableList(ALL);
    }

    /** Defaults only: nothing from the environment. */
    public static Params defaults() {
        return new Params(new LinkedHashMap<>(), new LinkedHashMap<>());
    }

    /** Defaults, overridden by {@code SPARKCCL_*} environment variables, then by {@code -Dsparkccl.*}. */
    public static Params fromEnvironment() {
        Map<String, String> settings = new LinkedHashMap<>();
        for (Param<?> p : ALL) {
            String env = System.getenv(p.envName());
            if (env != null && !env.isBlank()) {
                settings.put(p.envName(), env);
            }
            String prop = System.getProperty("sparkccl." + p.confName());
            if (prop != null && !prop.isBlank()) {
                settings.put(p.envName(), prop);
            }
        }
        return defaults().withOverrides(settings);
    }

    /**
     * A copy with these settings applied. Keys may be {@code SPARKCCL_NAME}, {@code NAME},
     * {@code confName} or {@code spark.sparkccl.confName}; unknown {@code spark.sparkccl.*} keys are
     * refused so that a typo does not pass silently. Other keys are ignored.
     */
    public Params withOverrides(Map<String, String> settings) {
        Map<Param<?>, Object> v = new LinkedHashMap<>(values);
        Map<Param<?>, String> s = new LinkedHashMap<>(sources);
        for (Map.Entry<String, String> e : settings.entrySet()) {
            Param<?> p = find(e.getKey());
            if (p == null) {
                if (e.getKey().startsWith("spark.sparkccl.") || e.getKey().startsWith("SPARKCCL_")) {
                    throw new IllegalArgumentException("unknown sparkccl parameter '" + e.getKey() + "'; known: "
                            + names());
                }
                continue;
            }
            v.put(p, p.parse(e.getValue(), e.getKey()));
            s.put(p, e.getKey());
        }
        return new Params(v, s);
    }

    @SuppressWarnings("unchecked")
    public <T> T get(Param<T> p) {
        return values.containsKey(p) ? (T) values.get(p) : p.defaultValue();
    }

    public boolean isSet(Param<?> p) {
        return values.containsKey(p);
    }

    /** The settings that differ from defaults, as {@code NAME=value (from source)} lines: logged once at init. */
    public List<String> describeSet() {
        List<String> out = new ArrayList<>();
        for (Map.Entry<Param<?>, Object> e : values.entrySet()) {
            out.add(e.getKey().name() + "=" + e.getValue() + " (from " + sources.get(e.getKey()) + ")");
        }
        return out;
    }

    /** The settings as {@code SPARKCCL_NAME -> text}, to hand to another process. */
    public Map<String, String> toEnvironment() {
        Map<String, String> out = new LinkedHashMap<>();
        for (Map.Entry<Param<?>, Object> e : values.entrySet()) {
            Object value = e.getValue();
            out.put(e.getKey().envName(), value instanceof Boolean ? ((Boolean) value ? "1" : "0") : String.valueOf(value));
        }
        return out;
    }

    public static Param<?> find(String key) {
        String k = key;
        if (k.startsWith("spark.sparkccl.")) {
            k = k.substring("spark.sparkccl.".length());
        } else if (k.startsWith("sparkccl.")) {
            k = k.substring("sparkccl.".length());
        } else if (k.startsWith("SPARKCCL_")) {
            k = k.substring("SPARKCCL_".length());
        }
        for (Param<?> p : ALL) {
            if (p.name().equals(k) || p.confName().equals(k)) {
                return p;
            }
        }
        return null;
    }

    private static String names() {
        List<String> n = new ArrayList<>();
        for (Param<?> p : ALL) {
            n.add(p.confName());
        }
        return String.join(", ", n);
    }

    /** Registers a parameter; other modules define theirs (e.g. allowSharedGpu) through this too. */
    public static synchronized <T> Param<T> define(String name, T defaultValue, String description,
                                                   Function<String, T> parser) {
        for (Param<?> p : ALL) {
            if (p.name().equals(name)) {
                throw new IllegalStateException("parameter " + name + " defined twice");
            }
        }
        Param<T> p = new Param<>(name, defaultValue, description, parser);
        ALL.add(p);
        return p;
    }

    static int parseResidentThreads(String s) {
        int v = Integer.parseInt(s.trim());
        if (v < 64 || v > 512 || v % 32 != 0) {
            throw new IllegalArgumentException("must be a multiple of 32 from 64 to 512, not " + v);
        }
        return v;
    }

    static int parsePdlMaxBlocks(String s) {
        int v = Integer.parseInt(s.trim());
        if (v < 0 || v > PDL_MAX_BLOCKS_LIMIT) {
            throw new IllegalArgumentException("must be from 0 to " + PDL_MAX_BLOCKS_LIMIT + ", not " + v);
        }
        return v;
    }

    static int parsePositive(String s) {
        int v = Integer.parseInt(s.trim());
        if (v < 1) {
            throw new IllegalArgumentException("must be 1 or more, not " + v);
        }
        return v;
    }

    /** A size of at least 8 bytes (parseSize's spelling): one GPU thread's share of a one-shot all-reduce. */
    static long parseOneShotBlockBytes(String s) {
        long v = parseSize(s);
        if (v < 8) {
            throw new IllegalArgumentException("must be 8 bytes or more, not " + v);
        }
        return v;
    }

    public static boolean parseBoolean(String s) {
        switch (s.toLowerCase(Locale.ROOT)) {
            case "1": case "true": case "yes": case "on": return true;
            case "0": case "false": case "no": case "off": return false;
            default: throw new IllegalArgumentException("expected 1/0 or true/false");
        }
    }

    /** Bytes with an optional K, M or G suffix (powers of 1024). */
    public static long parseSize(String s) {
        String t = s.trim().toUpperCase(Locale.ROOT);
        long mul = 1;
        if (t.endsWith("B")) {
            t = t.substring(0, t.length() - 1);
        }
        if (t.endsWith("K")) {
            mul = 1L << 10;
        } else if (t.endsWith("M")) {
            mul = 1L << 20;
        } else if (t.endsWith("G")) {
            mul = 1L << 30;
        }
        if (mul != 1) {
            t = t.substring(0, t.length() - 1);
        }
        return Long.parseLong(t.trim()) * mul;
    }

    /** The allowed spelling of {@code s}, whatever its case: a parser for parameters with a few named values. */
    public static String oneOfIgnoringCase(String s, String... allowed) {
        for (String a : allowed) {
            if (a.equalsIgnoreCase(s.trim())) {
                return a;
            }
        }
        throw new IllegalArgumentException("expected one of " + String.join(", ", allowed));
    }

    private static String oneOf(String s, String... allowed) {
        for (String a : allowed) {
            if (a.equals(s)) {
                return s;
            }
        }
        throw new IllegalArgumentException("expected one of " + String.join(", ", allowed));
    }
}
