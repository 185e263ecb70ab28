package org.sparkccl.ipc.plot;

import java.awt.Color;
import java.awt.geom.Ellipse2D;
import java.awt.image.BufferedImage;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import javax.imageio.ImageIO;
import org.jfree.chart.JFreeChart;
import org.jfree.chart.axis.LogAxis;
import org.jfree.chart.axis.NumberAxis;
import org.jfree.chart.axis.ValueAxis;
import org.jfree.chart.plot.SeriesRenderingOrder;
import org.jfree.chart.plot.XYPlot;
import org.jfree.chart.renderer.xy.XYLineAndShapeRenderer;
import org.jfree.data.xy.XYSeriesCollection;

/**
 * sparkccl's line charts (JFreeChart): one line with points per series, linear or log axes, white
 * background, PNG out. The perf tool, TrainJob and the notebooks all draw through this class so
 * their pictures look alike.
 */
public final class Charts {
    public static final int WIDTH = 800;
    public static final int HEIGHT = 480;

    private Charts() {
    }

    /** A line chart of the series in {@code data}; a log axis needs every value on it above 0. */
    public static JFreeChart lines(String title, String xLabel, boolean logX, String yLabel, boolean logY,
                                   XYSeriesCollection data) {
        XYLineAndShapeRenderer renderer = new XYLineAndShapeRenderer(true, true);
        // Small dots, all alike: series differ by colour, and curves of a hundred points stay readable.
        renderer.setAutoPopulateSeriesShape(false);
        renderer.setDefaultShape(new Ellipse2D.Double(-2, -2, 4, 4));
        XYPlot plot = new XYPlot(data, axis(xLabel, logX), axis(yLabel, logY), renderer);
        // Later series on top: a curve that continues another (a resumed run) is drawn over it.
        plot.setSeriesRenderingOrder(SeriesRenderingOrder.FORWARD);
        plot.setBackgroundPaint(Color.WHITE);
        plot.setDomainGridlinePaint(Color.LIGHT_GRAY);
        plot.setRangeGridlinePaint(Color.LIGHT_GRAY);
        JFreeChart chart = new JFreeChart(title, JFreeChart.DEFAULT_TITLE_FONT, plot, data.getSeriesCount() > 1);
        chart.setBackgroundPaint(Color.WHITE);
        return chart;
    }

    private static ValueAxis axis(String label, boolean log) {
        if (log) {
            LogAxis axis = new LogAxis(label);
            axis.setBase(2);
            axis.setSmallestValue(1e-12);
            return axis;
        }
        NumberAxis axis = new NumberAxis(label);
        axis.setAutoRangeIncludesZero(false);
        return axis;
    }

    /** The chart as PNG bytes, WIDTH x HEIGHT. */
    public static byte[] png(JFreeChart chart) {
        BufferedImage image = chart.createBufferedImage(WIDTH, HEIGHT);
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try {
            ImageIO.write(image, "png", out);
        } catch (IOException e) {
            throw new UncheckedIOException("could not encode the chart '" + chart.getTitle().getText() + "' as PNG", e);
        }
        return out.toByteArray();
    }

    /** Writes the chart to {@code file} as PNG, creating its folder. */
    public static void writePng(JFreeChart chart, Path file) throws IOException {
        Path parent = file.toAbsolutePath().getParent();
        if (parent != null) {
            Files.createDirectories(parent);
        }
        Files.write(file, png(chart));
    }
}
