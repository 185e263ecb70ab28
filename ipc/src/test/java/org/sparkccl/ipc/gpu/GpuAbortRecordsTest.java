package org.sparkccl.ipc.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.sparkccl.core.PeerFailedException;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.transport.HostIdentity;
import org.sparkccl.core.transport.RankInfo;
import org.sparkccl.core.shm.ShmTransport;

/**
 * The GPU engine's abort records without a GPU: three ranks of this JVM, each mapping the others'
 * records, as GpuCommunicator does after its bootstrap round.
 */
class GpuAbortRecordsTest {
    private static final int RANKS = 3;

    @Test
    void aPeerReadsWhoAbortedFirstAndWhy() throws Exception {
        long segmentsBefore = ourSegments();
        long mappedBefore = ShmTransport.mappedBytesInJvm();
        try (ShmTransport shm = new ShmTransport(Params.defaults())) {
            GpuAbortRecords[] records = connect(shm);
            try {
                for (GpuAbortRecords r : records) {
                    assertNull(r.peerAbort("while this rank waited"), "nobody aborted yet");
                    assertFalse(r.aborted());
                }
                assertEquals(segmentsBefore + RANKS, ourSegments(), "one record per rank in /dev/shm");
                for (GpuAbortRecords r : records) {
                    r.removeNameOnceEveryPeerMappedIt(); // both peers mapped each: a SIGKILL now leaves nothing
                }
                assertEquals(segmentsBefore, ourSegments(), "record names left in /dev/shm once every peer mapped them");
                String reason = "rank 1: its Spark task was killed (the test kills rank 1) between collectives";
                records[1].markAborted(1, reason);
                assertTrue(records[1].aborted());
                assertNull(records[1].peerAbort("while this rank waited"), "a rank does not read its own record");
                PeerFailedException seen = records[0].peerAbort("while this rank waited for allReduce #4");
                assertEquals(1, seen.failedRank());
                assertEquals("rank 0: rank 1 aborted while this rank waited for allReduce #4: " + reason, seen.getMessage());

                // Rank 2 fails because of rank 1 and records that; rank 0 still names rank 1, whichever it reads.
                records[2].markAborted(1, "rank 2: cancelled; before that: " + reason);
                records[1].markAborted(1, "a later reason is not kept");
                assertEquals(1, records[0].peerAbort("x").failedRank());
                assertTrue(records[0].peerAbort("x").getMessage().endsWith(reason), records[0].peerAbort("x").getMessage());
                assertEquals(1, records[0].awaitPeerAbort("x", 0).failedRank());
            } finally {
                for (GpuAbortRecords r : records) {
                    r.close();
                }
            }
            assertEquals(0, shm.outstandingBytes(), "records still mapped through the transport");
        }
        assertEquals(mappedBefore, ShmTransport.mappedBytesInJvm(), "bytes of /dev/shm still mapped");
        assertEquals(segmentsBefore, ourSegments(), "segments of this process left in /dev/shm");
    }

    @Test
    void withoutAnAbortTheWaitForARecordEndsAfterItsBound() {
        try (ShmTransport shm = new ShmTransport(Params.defaults())) {
            GpuAbortRecords[] records = connect(shm);
            try {
                long start = System.nanoTime();
                assertNull(records[0].awaitPeerAbort("x", 100));
                long ms = (System.nanoTime() - start) / 1_000_000;
                assertTrue(ms >= 100 && ms < 2_000, "waited " + ms + " ms");
            } finally {
                for (GpuAbortRecords r : records) {
                    r.close();
                }
            }
        }
    }

    /** Every rank's record, each with the others' mapped. */
    private static GpuAbortRecords[] connect(ShmTransport shm) {
        GpuAbortRecords[] records = new GpuAbortRecords[RANKS];
        byte[][] blobs = new byte[RANKS][];
        RankInfo[] infos = new RankInfo[RANKS];
        for (int r = 0; r < RANKS; r++) {
            records[r] = new GpuAbortRecords(shm, r);
            blobs[r] = records[r].connectBlob();
            infos[r] = RankInfo.local(r, RANKS);
        }
        for (GpuAbortRecords r : records) {
            r.open(shm, infos, blobs);
        }
        return records;
    }

    private static long ourSegments() throws IOException {
        try (Stream<java.nio.file.Path> files = Files.list(Paths.get("/dev/shm"))) {
            return files.filter(f -> f.getFileName().toString().startsWith("sparkccl-" + HostIdentity.pid() + "-")).count();
        }
    }
}
