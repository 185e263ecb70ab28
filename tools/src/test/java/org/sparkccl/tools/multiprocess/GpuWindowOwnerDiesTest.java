package org.sparkccl.tools.multiprocess;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.sparkccl.ipc.cuda.GpuSupport;
import org.sparkccl.tools.launch.LaunchResult;
import org.sparkccl.tools.launch.RankLauncher;

/**
 * The point of sharing GPU windows as CUDA virtual memory (issue 15): memory a peer process imported
 * stays valid after its owner is SIGKILLed (through CUDA IPC it went with the owner, and a kernel still
 * reading it stopped with an illegal address that ended the reader's CUDA context), and goes back to
 * the GPU when the peer closes its import. Deterministic: {@link GpuWindowOwnerDiesRank}.
 */
@Tag("gpu")
class GpuWindowOwnerDiesTest {
    private static final Pattern HELD = Pattern.compile("HELD (\\d+) (\\d+) mapped (\\d+)");

    @Test
    void importedMemoryOutlivesItsOwnerAndIsFreedByTheLastImporter() {
        String reason = GpuSupport.unavailableReason();
        Assumptions.assumeTrue(reason == null, "no GPU: " + reason);
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        PrintStream sink = new PrintStream(out, true, StandardCharsets.UTF_8);
        LaunchResult result = RankLauncher.of(2, GpuWindowOwnerDiesRank.class.getName())
                .survivorGrace(Duration.ofSeconds(60)).timeout(Duration.ofSeconds(120)).output(sink, sink).run();
        String text = out.toString(StandardCharsets.UTF_8);
        System.out.println(text);
        assertEquals(0, result.exitCode(0), "the survivor failed:\n" + text);
        assertTrue(text.contains("READ the owner's"), text);
        Matcher m = HELD.matcher(text);
        assertTrue(m.find(), text);
        long freed = Long.parseLong(m.group(1)) - Long.parseLong(m.group(2));
        System.out.println("MEASURED owner dead: its " + GpuWindowOwnerDiesRank.BYTES + " bytes read back intact; "
                + freed + " bytes of GPU memory freed when the survivor closed its import");
        assertTrue(freed >= GpuWindowOwnerDiesRank.BYTES, "closing the import freed only " + freed + " bytes");
        assertEquals("0", m.group(3), "imported bytes still counted");
    }
}
