package org.sparkccl.train;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.awt.image.BufferedImage;
import java.io.ByteArrayInputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import javax.imageio.ImageIO;
import org.jfree.chart.JFreeChart;
import org.jfree.chart.plot.XYPlot;
import org.jfree.data.xy.XYDataset;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.sparkccl.train.plot.Charts;

class LossChartTest {
    @Test
    void aResumedRunContinuesAtItsFirstStepAndThePngDecodes(@TempDir Path dir) throws Exception {
        Map<String, TrainResult> runs = new LinkedHashMap<>();
        runs.put("first", new TrainResult(0, 0, new double[] {2.0, 1.5, 1.0}, new float[1], 1, 0, 0));
        runs.put("resumed", new TrainResult(0, 3, new double[] {0.8, 0.6}, new float[1], 1, 0, 0));
        JFreeChart chart = LossChart.of("losses", runs);

        XYDataset data = ((XYPlot) chart.getPlot()).getDataset();
        assertEquals(2, data.getSeriesCount());
        assertEquals("resumed", data.getSeriesKey(1));
        assertEquals(3.0, data.getXValue(1, 0), "the resumed curve starts at its first step");
        assertEquals(0.6, data.getYValue(1, 1));

        Path png = dir.resolve("plots/loss.png");
        Charts.writePng(chart, png);
        BufferedImage image = ImageIO.read(new ByteArrayInputStream(Files.readAllBytes(png)));
        assertEquals(Charts.WIDTH, image.getWidth());
        assertEquals(Charts.HEIGHT, image.getHeight());
    }
}
