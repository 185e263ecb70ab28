package org.sparkccl.core.transport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

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
