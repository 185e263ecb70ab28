package org.sparkccl.ipc.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.sparkccl.core.CclException;
import org.sparkccl.core.log.CclLog;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.topo.GpuLinkFacts;
import org.sparkccl.core.topo.Ring;
import org.sparkccl.core.topo.RingPlanner;
import org.sparkccl.core.topo.RingSearch;
import org.sparkccl.core.topo.Topology;
import org.sparkccl.core.topo.TopologySource;
import org.sparkccl.core.transport.RankInfo;

/**
 * What the GPU communicator's ranks gather and the rings they compute from it, without a GPU: each
 * rank's description goes through the bytes of the init round, and every rank must get the same rings
 * from them (those bin/sparkccl-topo prints for the machine), or fail alike.
 */
class GpuRingFactsTest {
    /** A 4-GPU box behind one Gen4 switch; GPU 3 trained at Gen3 x8 and with AER errors. */
    private static final String BOX = String.join("\n",
            "sparkccl-topology 1",
            "numa 0 cpus=0-15",
            "hostbridge pci0000:00 numa=0",
            "pci 0000:00:01.0 parent=pci0000:00 class=0x060400 vendor=0x8086 numa=0 link=16x16 maxlink=16x16",
            "pci 0000:01:00.0 parent=0000:00:01.0 class=0x060400 vendor=0x10b5 numa=0 link=16x16 maxlink=16x16",
            "pci 0000:02:08.0 parent=0000:01:00.0 class=0x060400 vendor=0x10b5 numa=0 link=16x16 maxlink=16x16",
            "pci 0000:02:10.0 parent=0000:01:00.0 class=0x060400 vendor=0x10b5 numa=0 link=16x16 maxlink=16x16",
            "pci 0000:02:18.0 parent=0000:01:00.0 class=0x060400 vendor=0x10b5 numa=0 link=16x16 maxlink=16x16",
            "pci 0000:02:20.0 parent=0000:01:00.0 class=0x060400 vendor=0x10b5 numa=0 link=16x16 maxlink=16x16",
            "pci 0000:10:00.0 parent=0000:02:08.0 class=0x030200 vendor=0x10de numa=0 link=16x16 maxlink=16x16",
            "pci 0000:11:00.0 parent=0000:02:10.0 class=0x030200 vendor=0x10de numa=0 link=16x16 maxlink=16x16",
            "pci 0000:12:00.0 parent=0000:02:18.0 class=0x030200 vendor=0x10de numa=0 link=16x16 maxlink=16x16",
            "pci 0000:13:00.0 parent=0000:02:20.0 class=0x030200 vendor=0x10de numa=0 link=8x8 maxlink=16x16"
                    + " aer.correctable.RxErr=7 aer.correctable.TOTAL_ERR_COR=7",
            "nvlink 0000:10:00.0 0000:12:00.0 4",
            "");
    private static final List<String> GPUS = List.of("0000:10:00.0", "0000:11:00.0", "0000:12:00.0", "0000:13:00.0");

    private static Params params(Path topo, String... more) {
        Map<String, String> m = new java.util.HashMap<>(Map.of("SPARKCCL_TOPO_FILE", topo.toString()));
        for (int i = 0; i < more.length; i += 2) {
            m.put(more[i], more[i + 1]);
        }
        return Params.defaults().withOverrides(m);
    }

    private static Path box(Path dir) throws IOException {
        Path topo = dir.resolve("box.topo");
        Files.writeString(topo, BOX);
        return topo;
    }

    private static byte[] uuid(String busId) {
        byte[] u = new byte[16];
        byte[] b = busId.getBytes(java.nio.charset.StandardCharsets.US_ASCII);
        System.arraycopy(b, 0, u, 0, Math.min(16, b.length));
        return u;
    }

    /** Rank r runs in process 100 + r on GPU busIdByRank[r], every GPU reaching every other unless P2P is off. */
    private static GpuRankInfo[] gpus(List<String> busIdByRank, boolean p2pDisabled) {
        GpuRankInfo[] out = new GpuRankInfo[busIdByRank.size()];
        for (int r = 0; r < out.length; r++) {
            List<byte[]> reach = new ArrayList<>();
            for (String g : GPUS) {
                reach.add(uuid(g));
            }
            out[r] = new GpuRankInfo(0, uuid(busIdByRank.get(r)), busIdByRank.get(r), p2pDisabled, reach);
        }
        return out;
    }

    /** What every rank receives from the round: each rank's description, built from its own view. */
    private static RankInfo[] round(List<String> busIdByRank, GpuRankInfo[] gpus, List<Params> paramsByRank) {
        int n = busIdByRank.size();
        RankInfo[] infos = new RankInfo[n];
        for (int r = 0; r < n; r++) {
            Params p = paramsByRank.get(r);
            Topology t = TopologySource.load(p);
            GpuRingFacts.Observed seen = new GpuRingFacts.Observed(t,
                    GpuLinkFacts.observe(t, busIdByRank.get(r), Map.of(), p.get(Params.AVOID_SLOW_LINKS)));
            RankInfo me = new RankInfo(r, n, "host", 100 + r, 1, Map.of())
                    .withEntry(GpuCommunicator.ENTRY_DEVICE, gpus[r].encode());
            infos[r] = RankInfo.decode(seen.addTo(me, p).encode(), r, n);
        }
        return infos;
    }

    private static List<Ring> ringsOn(int rank, RankInfo[] infos, Params p, int channels) {
        GpuRankInfo[] decoded = new GpuRankInfo[infos.length];
        for (int r = 0; r < infos.length; r++) {
            decoded[r] = GpuRankInfo.decode(infos[r].entry(GpuCommunicator.ENTRY_DEVICE), r);
        }
        return GpuRingFacts.rings(infos, decoded, rank, channels, p, new CclLog(rank, p));
    }

    @Test
    void everyRankComputesTheToolsRingsFromTheGatheredFacts(@TempDir Path dir) throws IOException {
        Params p = params(box(dir));
        List<String> busIds = List.of(GPUS.get(3), GPUS.get(0), GPUS.get(1), GPUS.get(2));
        RankInfo[] infos = round(busIds, gpus(busIds, false), List.of(p, p, p, p));
        Topology t = TopologySource.load(p);
        List<Ring> tool = RingPlanner.plan(t, busIds, 2, RingSearch.ChannelMode.SPREAD, p, new CclLog(0, p));
        for (int rank = 0; rank < 4; rank++) {
            assertEquals(List.of(tool.get(0), tool.get(1), tool.get(0), tool.get(1)), ringsOn(rank, infos, p, 4),
                    "rank " + rank);
        }
        // Rank 1's GPU reaches rank 3's over NVLink: the ring keeps them next to each other.
        Ring first = tool.get(0);
        assertTrue(first.next(1) == 3 || first.prev(1) == 3, first.toString());
    }

    @Test
    void withP2pOffEveryHopIsStagedAndTheRingsStillAgree(@TempDir Path dir) throws IOException {
        Params p = params(box(dir), "SPARKCCL_P2P_DISABLE", "1");
        RankInfo[] infos = round(GPUS, gpus(GPUS, true), List.of(p, p, p, p));
        List<Ring> rings = ringsOn(0, infos, p, 2);
        for (int rank = 1; rank < 4; rank++) {
            assertEquals(rings, ringsOn(rank, infos, p, 2), "rank " + rank);
        }
        boolean[][] p2p = GpuRingFacts.p2pMatrix(gpus(GPUS, true));
        assertTrue(!p2p[0][2] && p2p[2][2]);
    }

    @Test
    void forcedRingsWinAndRanksThatDisagreeFailAlike(@TempDir Path dir) throws IOException {
        Path topo = box(dir);
        Params forced = params(topo, "SPARKCCL_RINGS", "0 2 1 3|0 3 1 2");
        RankInfo[] infos = round(GPUS, gpus(GPUS, false), List.of(forced, forced, forced, forced));
        assertEquals("0 -> 3 -> 1 -> 2 -> 0", ringsOn(2, infos, forced, 2).get(1).toString());

        Params other = params(topo);
        RankInfo[] mixed = round(GPUS, gpus(GPUS, false), List.of(forced, forced, other, forced));
        for (int rank = 0; rank < 4; rank++) {
            int me = rank;
            CclException e = assertThrows(CclException.class, () -> ringsOn(me, mixed, me == 2 ? other : forced, 2));
            assertTrue(e.getMessage().startsWith("rank " + rank + ": rank "), e.getMessage());
            assertTrue(e.getMessage().contains("set SPARKCCL_RINGS and SPARKCCL_AVOID_SLOW_LINKS alike"), e.getMessage());
        }
    }

    @Test
    void theLowestRankOnADegradedGpuWarnsOnceWithTheNumbersAndTheFix(@TempDir Path dir) throws IOException {
        Topology t = TopologySource.load(params(box(dir)));
        List<String> busIds = List.of(GPUS.get(0), GPUS.get(3), GPUS.get(3), GPUS.get(1));
        GpuRankInfo[] gpus = gpus(busIds, false);
        Params p = Params.defaults();
        assertNull(GpuRingFacts.warnLinkHealth(t, gpus, 0, new CclLog(0, p)));
        String warning = GpuRingFacts.warnLinkHealth(t, gpus, 1, new CclLog(1, p));
        assertTrue(warning.startsWith("GPU 0000:13:00.0: PCIe link runs at 8 GT/s x8 (7.88 GB/s), below its capability"
                + " of 16 GT/s x16 (31.51 GB/s)"), warning);
        assertTrue(warning.contains("Likely fix: reseat the card") && warning.contains("correctable.RxErr=7"), warning);
        assertNull(GpuRingFacts.warnLinkHealth(t, gpus, 2, new CclLog(2, p)), "rank 1 warned for this GPU already");
        assertNull(GpuRingFacts.warnLinkHealth(t, gpus, 3, new CclLog(3, p)));
    }
}
