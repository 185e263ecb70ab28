package org.sparkccl.ipc.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;

import org.junit.jupiter.api.Test;
import org.sparkccl.core.DataType;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.core.proto.CollectiveHeader;
import org.sparkccl.core.proto.CollectiveHeader.Kind;
import org.sparkccl.core.proto.Protocol;

/** Without a GPU: how a stream-ordered call is found again by the ticket a failed kernel recorded. */
class StreamCallsTest {
    @Test
    void recentCallsAreFoundByTicketAndOldOnesAreForgotten() {
        StreamCalls calls = new StreamCalls(null, "test");
        assertFalse(calls.pending(), "nothing queued yet");
        CollectiveHeader[] queued = new CollectiveHeader[3000];
        for (int ticket = 1; ticket < queued.length; ticket++) {
            queued[ticket] = new CollectiveHeader(ticket, Kind.ALL_REDUCE, DataType.FLOAT32, ReduceOp.SUM, Protocol.LL, 0,
                    ticket * 3L);
            calls.queued(queued[ticket]);
        }
        int last = queued.length - 1;
        assertSame(queued[last], calls.call(last));
        assertSame(queued[last - 1023], calls.call(last - 1023), "the last 1024 calls are remembered");
        assertNull(calls.call(last - 1024), "an older call shares its slot with a newer one: not named wrongly");
        assertNull(calls.call(last + 1), "a ticket not queued yet");
        assertEquals("allReduce #" + last + " (count " + last * 3L, calls.call(last).describe().substring(0,
                ("allReduce #" + last + " (count " + last * 3L).length()));
    }
}
