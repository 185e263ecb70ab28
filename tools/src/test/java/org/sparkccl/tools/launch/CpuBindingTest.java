package org.sparkccl.tools.launch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

class CpuBindingTest {
    @Test
    void readsKernelCpuLists() {
        assertEquals(List.of(0), CpuBinding.parseCpuList("0"));
        assertEquals(List.of(0, 1, 2, 3, 8, 10, 11), CpuBinding.parseCpuList("0-3,8,10-11"));
        assertEquals(List.of(), CpuBinding.parseCpuList(""));
    }

    @Test
    void bindsOnlyTheCallingThread() throws Exception {
        assumeTrue(Files.isReadable(Paths.get("/proc/thread-self/status")), "needs Linux /proc/thread-self");
        List<Integer> cpus = CpuBinding.allowedCpus();
        assertFalse(cpus.isEmpty(), "Cpus_allowed_list not found in /proc/self/status");
        int target = cpus.get(cpus.size() - 1);
        AtomicReference<Object> outcome = new AtomicReference<>();
        Thread t = new Thread(() -> {
            try {
                String why = CpuBinding.bindCallingThread(target);
                outcome.set(why != null ? why : allowedListOfThisThread());
            } catch (Exception e) {
                outcome.set(e);
            }
        });
        t.start();
        t.join();
        assertNull(outcome.get() instanceof Exception ? outcome.get() : null);
        assertEquals(List.of(target), CpuBinding.parseCpuList(String.valueOf(outcome.get())), "the bound thread's CPUs");
        assertEquals(cpus, CpuBinding.allowedCpus(), "the process (main thread) must stay unbound");
    }

    private static String allowedListOfThisThread() throws Exception {
        for (String line : Files.readAllLines(Paths.get("/proc/thread-self/status"), StandardCharsets.US_ASCII)) {
            if (line.startsWith("Cpus_allowed_list:")) {
                return line.substring(line.indexOf(':') + 1).trim();
            }
        }
        throw new IllegalStateException("no Cpus_allowed_list in /proc/thread-self/status");
    }
}
