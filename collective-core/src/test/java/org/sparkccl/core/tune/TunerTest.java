package org.sparkccl.core.tune;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import org.junit.jupiter.api.Test;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.proto.Protocol;

class TunerTest {

    private static Tuner tuner(Map<String, String> settings) {
        return new Tuner(Params.defaults().withOverrides(settings), 1);
    }

    @Test
    void smallAllReducesRunOneShotUpToTheThresholdAndTheRingAbove() {
        Tuner t = tuner(Map.of());
        long limit = Tuner.DEFAULT_ONESHOT_THRESHOLD;
        assertEquals(limit, t.oneShotSlotBytes());
        assertTrue(t.oneShotAllReduce(0));
        assertTrue(t.oneShotAllReduce(limit));
        assertFalse(t.oneShotAllReduce(limit + 1));
        assertEquals(Protocol.SIMPLE, t.protocol(1L << 20));
    }

    @Test
    void settingsMoveOrTurnOffTheOneShotRange() {
        assertFalse(tuner(Map.of("SPARKCCL_ALGO", "ring")).oneShotAllReduce(8));
        assertEquals(0, tuner(Map.of("SPARKCCL_ALGO", "Ring")).oneShotSlotBytes(), "no slots when the ring is forced");
        assertFalse(tuner(Map.of("SPARKCCL_ONESHOT_THRESHOLD", "0")).oneShotAllReduce(0));
        assertTrue(tuner(Map.of("SPARKCCL_ONESHOT_THRESHOLD", "1K")).oneShotAllReduce(1024));
        assertFalse(tuner(Map.of("SPARKCCL_ONESHOT_THRESHOLD", "1K")).oneShotAllReduce(1025));
        // Forcing a protocol pins the ring (so tests can run it at small sizes), unless one-shot is forced too.
        assertFalse(tuner(Map.of("SPARKCCL_PROTO", "Simple")).oneShotAllReduce(1024));
        assertTrue(tuner(Map.of("SPARKCCL_PROTO", "Simple", "SPARKCCL_ALGO", "OneShot")).oneShotAllReduce(1024));
        // Forced one-shot still stops where its slots end.
        assertTrue(tuner(Map.of("SPARKCCL_ALGO", "oneshot", "SPARKCCL_ONESHOT_THRESHOLD", "1M")).oneShotAllReduce(1L << 20));
        assertFalse(tuner(Map.of("SPARKCCL_ALGO", "OneShot", "SPARKCCL_ONESHOT_THRESHOLD", "1M")).oneShotAllReduce((1L << 20) + 1));
        assertThrows(IllegalArgumentException.class, () -> tuner(Map.of("SPARKCCL_ALGO", "tree")));
    }

    /** LL128 needs whole-line stores that a peer sees at once: the host engine refuses it, saying why. */
    @Test
    void theHostEngineRefusesLl128() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> tuner(Map.of("SPARKCCL_PROTO", "ll128")));
        assertTrue(e.getMessage().contains("GPU protocol") && e.getMessage().contains("LL, Simple or auto"), e.getMessage());
        assertEquals(Protocol.LL128, Protocol.fromName(" LL128 "));
    }
}
