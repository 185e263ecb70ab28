package org.sparkccl.core.transport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.sparkccl.core.param.Params;

class HostIdentityTest {

    private static Params pretending(String host) {
        return Params.defaults().withOverrides(Map.of("spark.sparkccl.hostId", host));
    }

    @Test
    void theMachineIdIsTheDefaultAndNamesHostAndBoot() {
        assertEquals(HostIdentity.machineId(), HostIdentity.hostId(Params.defaults()));
        assertTrue(HostIdentity.machineId().contains("/"), HostIdentity.machineId());
    }

    @Test
    void theMachineIdStartsWithTheKernelsHostNameResolvedOrNot() throws Exception {
        Path kernelName = Paths.get("/proc/sys/kernel/hostname");
        assumeTrue(Files.isReadable(kernelName), "Linux only");
        String name = Files.readString(kernelName).trim();
        assertTrue(HostIdentity.machineId().startsWith(name + "/"), HostIdentity.machineId() + " for host " + name);
    }

    @Test
    void aPretendIdSplitsOneMachineIntoHosts() {
        String a = HostIdentity.hostId(pretending("a"));
        assertEquals(a, HostIdentity.hostId(pretending(" a ")));
        assertNotEquals(a, HostIdentity.hostId(pretending("b")));
        assertNotEquals(HostIdentity.machineId(), a);
        RankInfo onA = new RankInfo(0, 2, a, 1, 1, Map.of());
        RankInfo onB = new RankInfo(1, 2, HostIdentity.hostId(pretending("b")), 1, 1, Map.of());
        assertTrue(!onA.sameHost(onB) && !onA.sameProcess(onB));
    }
}
