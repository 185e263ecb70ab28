package org.sparkccl.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.sparkccl.core.CclException;
import org.sparkccl.spark.StageBootstrap.Kind;

/** Which bootstrap a stage uses, from its task addresses and the setting alone: no Spark. */
class StageBootstrapTest {
    private static final List<String> ONE_HOST = List.of("10.0.0.5:40001", "10.0.0.5:40001", "10.0.0.5:40002");
    private static final List<String> TWO_HOSTS = List.of("10.0.0.5:40001", "10.0.0.6:40001");

    @Test
    void autoMeetsOnTheHostWhenEveryTaskRunsThere() {
        assertEquals(Kind.HOST, StageBootstrap.decide("auto", ONE_HOST));
        assertEquals(Kind.HOST, StageBootstrap.decide("auto", List.of("localhost:1")));
    }

    @Test
    void autoGoesThroughSparkWhenTheStageSpansHosts() {
        assertEquals(Kind.SPARK, StageBootstrap.decide("auto", TWO_HOSTS));
    }

    @Test
    void sparkIsSparkWhereverTheTasksRun() {
        assertEquals(Kind.SPARK, StageBootstrap.decide("spark", ONE_HOST));
        assertEquals(Kind.SPARK, StageBootstrap.decide("spark", TWO_HOSTS));
    }

    @Test
    void hostOnOneHostIsHost() {
        assertEquals(Kind.HOST, StageBootstrap.decide("host", ONE_HOST));
    }

    @Test
    void hostOnAStageThatSpansHostsSaysWhy() {
        CclException e = assertThrows(CclException.class, () -> StageBootstrap.decide("host", TWO_HOSTS));
        assertTrue(e.getMessage().contains("spark.sparkccl.bootstrap=host"), e.getMessage());
        assertTrue(e.getMessage().contains("[10.0.0.5, 10.0.0.6]"), e.getMessage());
        assertTrue(e.getMessage().contains("auto"), e.getMessage());
    }

    @Test
    void portsDoNotMakeHostsDifferent() {
        // Two executors of one machine (local-cluster) differ only in their ports.
        assertEquals(Kind.HOST, StageBootstrap.decide("auto", List.of("127.0.0.1:35001", "127.0.0.1:35002")));
    }

    @Test
    void theSettingIsValidatedAndNamed() {
        assertEquals("host", SparkCclSettings.resolve(Map.of("spark.sparkccl.bootstrap", "HOST"))
                .get(SparkCclSettings.BOOTSTRAP));
        assertEquals("auto", SparkCclSettings.resolve(Map.of()).get(SparkCclSettings.BOOTSTRAP));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> SparkCclSettings.resolve(Map.of("spark.sparkccl.bootstrap", "tcp")));
        assertTrue(e.getMessage().contains("BOOTSTRAP") && e.getMessage().contains("auto, spark, host"), e.getMessage());
    }

    @Test
    void theKeyNamesAppStageAndAttemptAsAFileName() {
        assertEquals("local-1733-stage3-attempt1", StageBootstrap.key("local-1733", 3, 1));
        assertEquals("app_x_y-stage0-attempt0", StageBootstrap.key("app/x y", 0, 0));
    }
}
