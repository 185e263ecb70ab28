package org.sparkccl.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Map;
import org.junit.jupiter.api.Test;
import org.sparkccl.core.param.Params;

class SparkCclSettingsTest {

    @Test
    void theSocketAddressDefaultsToTheExecutorsHost() {
        Params params = SparkCclSettings.withExecutorSocketAddress(Params.defaults(), "10.1.2.3");
        assertEquals("10.1.2.3", params.get(Params.SOCKET_ADDRESS));
    }

    @Test
    void aSocketAddressSetInSparkConfOrTheEnvironmentWins() {
        Params conf = SparkCclSettings.resolve(Map.of("spark.sparkccl.socketAddress", "127.0.0.1"));
        assertEquals("127.0.0.1", SparkCclSettings.withExecutorSocketAddress(conf, "10.1.2.3").get(Params.SOCKET_ADDRESS));
        Params env = Params.defaults().withOverrides(Map.of("SPARKCCL_SOCKET_ADDRESS", "192.168.0.9"));
        assertEquals("192.168.0.9", SparkCclSettings.withExecutorSocketAddress(env, "10.1.2.3").get(Params.SOCKET_ADDRESS));
    }

    @Test
    void withoutAnExecutorHostTheTransportKeepsItsOwnDefault() {
        assertEquals("", SparkCclSettings.withExecutorSocketAddress(Params.defaults(), null).get(Params.SOCKET_ADDRESS));
        assertEquals("", SparkCclSettings.withExecutorSocketAddress(Params.defaults(), " ").get(Params.SOCKET_ADDRESS));
    }
}
