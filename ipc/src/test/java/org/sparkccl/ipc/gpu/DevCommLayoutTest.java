package org.sparkccl.ipc.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.sparkccl.core.param.Params;

/**
 * The byte offsets the host writes (DevCommLayout) are those of the kernels' structs: read from
 * dev_comm.cuh itself, so that a field added on one side only fails here, without a GPU.
 */
class DevCommLayoutTest {
    private static final Path KERNELS = Path.of("src/main/cuda/dev_comm.cuh");
    private static final Path RESIDENT = Path.of("src/main/cuda/resident.cuh");

    @Test
    void collArgsOffsetsMatchTheKernels() throws IOException {
        Map<String, Integer> offsets = new LinkedHashMap<>();
        int size = structOffsets(source(), "CollArgs", offsets);
        assertEquals(DevCommLayout.ARGS_BYTES, size, "CollArgs size");
        Map<String, Integer> want = new LinkedHashMap<>();
        want.put("comm", DevCommLayout.ARG_COMM);
        want.put("send", DevCommLayout.ARG_SEND);
        want.put("recv", DevCommLayout.ARG_RECV);
        want.put("count", DevCommLayout.ARG_COUNT);
        want.put("blockElems", DevCommLayout.ARG_BLOCK);
        want.put("totalElems", DevCommLayout.ARG_TOTAL);
        want.put("chunkElems", DevCommLayout.ARG_CHUNK);
        want.put("sliceElems", DevCommLayout.ARG_SLICE);
        want.put("ticket", DevCommLayout.ARG_TICKET);
        want.put("kind", DevCommLayout.ARG_KIND);
        want.put("type", DevCommLayout.ARG_TYPE);
        want.put("op", DevCommLayout.ARG_OP);
        want.put("proto", DevCommLayout.ARG_PROTO);
        want.put("root", DevCommLayout.ARG_ROOT);
        want.put("nchannels", DevCommLayout.ARG_NCHANNELS);
        want.put("flags", DevCommLayout.ARG_FLAGS);
        want.forEach((field, offset) -> assertEquals(offset, offsets.get(field), "CollArgs." + field));
    }

    @Test
    void devCommHeaderOffsetsMatchTheKernels() throws IOException {
        Map<String, Integer> offsets = new LinkedHashMap<>();
        structOffsets(source(), "DevComm", offsets);
        Map<String, Integer> want = new LinkedHashMap<>();
        want.put("rank", DevCommLayout.RANK);
        want.put("nranks", DevCommLayout.NRANKS);
        want.put("llSlotBytes", DevCommLayout.LL_SLOT_BYTES);
        want.put("simpleSlotBytes", DevCommLayout.SIMPLE_SLOT_BYTES);
        want.put("myState", DevCommLayout.MY_STATE);
        want.put("nextState", DevCommLayout.NEXT_STATE);
        want.put("hostStatus", DevCommLayout.HOST_STATUS);
        want.put("timeoutNs", DevCommLayout.TIMEOUT_NS);
        want.put("blocksDone", DevCommLayout.BLOCKS_DONE);
        want.put("calls", DevCommLayout.CALLS);
        want.put("probe", DevCommLayout.PROBE);
        want.put("oneShotCalls", DevCommLayout.ONE_SHOT_CALLS);
        want.put("ch", DevCommLayout.HEADER_BYTES);
        want.forEach((field, offset) -> assertEquals(offset, offsets.get(field), "DevComm." + field));
    }

    @Test
    void statusWordsMatchTheKernels() throws IOException {
        String src = source();
        assertEquals(DevCommLayout.STATUS_FAILED_TICKET, 4 * enumValue(src, "STATUS_WORD_FAILED_TICKET"));
        assertEquals(DevCommLayout.STATUS_DONE_SEQ, 4 * enumValue(src, "STATUS_WORD_DONE_SEQ"));
        assertEquals(DevCommLayout.STATUS_START_NS, 4 * enumValue(src, "STATUS_WORD_START_NS"));
        assertEquals(DevCommLayout.STATUS_END_NS, 4 * enumValue(src, "STATUS_WORD_END_NS"));
        assertEquals(DevCommLayout.ARG_FLAG_STREAM, enumValue(src, "ARG_FLAG_STREAM"));
    }

    @Test
    void streamResidentLayoutMatchesTheKernel() throws IOException {
        String src = source(RESIDENT);
        assertEquals(StreamResidentKernel.RING_SLOTS, enumValue(src, "STREAM_RING_SLOTS"));
        assertEquals(StreamResidentKernel.CTL_PUBLISHED, enumValue(src, "CTL_PUBLISHED"));
        assertEquals(StreamResidentKernel.CTL_STOP, enumValue(src, "CTL_STOP"));
        assertEquals(StreamResidentKernel.CTL_EXIT, enumValue(src, "CTL_EXIT"));
        assertEquals(StreamResidentKernel.CTL_CONSUMED, enumValue(src, "CTL_CONSUMED"));
        assertEquals(StreamResidentKernel.EXIT_DECIDING, enumValue(src, "EXIT_DECIDING"));
        assertEquals(StreamResidentKernel.EXIT_ENDED, enumValue(src, "EXIT_ENDED"));
        Map<String, Integer> offsets = new LinkedHashMap<>();
        assertEquals(StreamResidentKernel.PARAM_BYTES, structOffsets(src, "StreamResidentArgs", offsets));
        Map<String, Integer> want = new LinkedHashMap<>();
        want.put("comm", StreamResidentKernel.PARAM_COMM);
        want.put("ring", StreamResidentKernel.PARAM_RING);
        want.put("control", StreamResidentKernel.PARAM_CONTROL);
        want.put("bell", StreamResidentKernel.PARAM_BELL);
        want.put("done", StreamResidentKernel.PARAM_DONE);
        want.put("lastSeq", StreamResidentKernel.PARAM_LAST_SEQ);
        want.put("idleNs", StreamResidentKernel.PARAM_IDLE_NS);
        want.forEach((field, offset) -> assertEquals(offset, offsets.get(field), "StreamResidentArgs." + field));
    }

    @Test
    void programmaticLaunchLimitMatchesTheKernels() throws IOException {
        Matcher m = Pattern.compile("#define PDL_MAX_BLOCKS (\\d+)").matcher(source());
        assertTrue(m.find(), "PDL_MAX_BLOCKS not in " + KERNELS);
        assertEquals(Params.PDL_MAX_BLOCKS_LIMIT, Integer.parseInt(m.group(1)));
    }

    private static String source() throws IOException {
        return source(KERNELS);
    }

    private static String source(Path file) throws IOException {
        assertTrue(Files.exists(file), "run from the ipc module: " + file.toAbsolutePath());
        return Files.readString(file);
    }

    private static int enumValue(String src, String name) {
        Matcher m = Pattern.compile("\\b" + name + "\\s*=\\s*(\\d+)").matcher(src);
        assertTrue(m.find(), name + " not in " + KERNELS);
        return Integer.parseInt(m.group(1));
    }

    /**
     * Offsets of the fields of {@code struct name} (naturally aligned uint64_t / uint32_t fields and
     * arrays; a field of another struct type ends the walk: its offset is recorded). Returns the size.
     */
    private static int structOffsets(String src, String name, Map<String, Integer> offsets) {
        Matcher start = Pattern.compile("struct " + name + " \\{").matcher(src);
        assertTrue(start.find(), "struct " + name + " not in " + KERNELS);
        int end = src.indexOf("\n};", start.end());
        Pattern field = Pattern.compile("^\\s*(\\w+)\\s+([^;]+);", Pattern.MULTILINE);
        Matcher m = field.matcher(src.substring(start.end(), end));
        int at = 0;
        while (m.find()) {
            String type = m.group(1);
            int width = type.equals("uint64_t") ? 8 : type.equals("uint32_t") ? 4 : -1;
            for (String decl : m.group(2).split(",")) {
                decl = decl.trim();
                String fieldName = decl.replaceAll("\\[.*", "").trim();
                if (width < 0) {
                    offsets.put(fieldName, at);
                    return -1;
                }
                at = (at + width - 1) / width * width;
                offsets.put(fieldName, at);
                int n = 1;
                Matcher dim = Pattern.compile("\\[([^\\]]+)\\]").matcher(decl);
                if (dim.find()) {
                    n = evaluate(dim.group(1));
                }
                at += width * n;
            }
        }
        return (at + 7) / 8 * 8;
    }

    /** Array lengths: a number or {@code A - B - C} of numbers and SCCL_MAX_ONESHOT_RANKS. */
    private static int evaluate(String expr) {
        int total = 0;
        int sign = 1;
        for (String token : expr.replace("-", " - ").trim().split("\\s+")) {
            if (token.equals("-")) {
                sign = -1;
            } else {
                total += sign * (token.equals("SCCL_MAX_ONESHOT_RANKS") ? 8 : Integer.parseInt(token));
                sign = 1;
            }
        }
        return total;
    }
}
