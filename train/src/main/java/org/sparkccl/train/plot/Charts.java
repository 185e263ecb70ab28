package org.sparkccl.train.plot;

import java.awt.Color;
import java.awt.Paint;
import java.awt.geom.Ellipse2D;
import java.awt.image.BufferedImage;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.text.DecimalFormat;
import java.text.FieldPosition;
import java.text.NumberFormat;
import java.text.ParsePosition;
import java.util.Locale;
import javax.imageio.ImageIO;
import org.jfree.chart.JFreeChart;
import org.jfree.chart.axis.LogAxis;
import org.jfree.chart.axis.NumberAxis;
import org.jfree.chart.axis.ValueAxis;
import org.jfree.chart.plot.CombinedDomainXYPlot;
import org.jfree.chart.plot.DefaultDrawingSupplier;
import org.jfree.chart.plot.SeriesRenderingOrder;
import org.jfree.chart.plot.XYPlot;
import org.jfree.chart.renderer.xy.XYLineAndShapeRenderer;
import org.jfree.data.xy.XYSeriesCollection;

/**
 * sparkccl's line charts (JFreeChart): one line with dots per series, linear or log axes, white
 * background, PNG out. The perf tool, TrainJob and the notebooks all draw through this class so
 * their pictures look alike.
 */
public final class Charts {
    public static final int WIDTH = 800;
    public static final int HEIGHT = 480;
    private static final Paint[] COLOURS = DefaultDrawingSupplier.DEFAULT_PAINT_SEQUENCE;

    private Charts() {
    }

    /** A line chart of the series in {@code data}; a log axis needs every value on it above 0. */
    public static JFreeChart lines(String title, String xLabel, boolean logX, String yLabel, boolean logY,
                                   XYSeriesCollection data) {
        XYPlot plot = plot(data, logX ? logAxis(xLabel, new DecimalFormat("0.####")) : linearAxis(xLabel), yLabel, logY);
        JFreeChart chart = new JFreeChart(title, JFreeChart.DEFAULT_TITLE_FONT, plot, data.getSeriesCount() > 1);
        chart.setBackgroundPaint(Color.WHITE);
        return chart;
    }

    /**
     * A benchmark sweep: bus bandwidth (top) and time per call (bottom) against message size, all
     * three on log axes, one line per series (a protocol, a placement), in the same colour in both panels.
     */
    public static JFreeChart sizeSweep(String title, XYSeriesCollection busBandwidthGBps, XYSeriesCollection timeUs) {
        LogAxis size = logAxis("message size", new ByteSizeFormat());
        CombinedDomainXYPlot combined = new CombinedDomainXYPlot(size);
        XYPlot bandwidth = plot(busBandwidthGBps, null, "busbw (GB/s)", true);
        combined.add(bandwidth, 1);
        XYPlot time = plot(timeUs, null, "time (us)", true);
        time.getRenderer().setDefaultSeriesVisibleInLegend(false); // same series, same colours: one legend
        combined.add(time, 1);
        JFreeChart chart = new JFreeChart(title, JFreeChart.DEFAULT_TITLE_FONT, combined, true);
        chart.setBackgroundPaint(Color.WHITE);
        return chart;
    }

    private static XYPlot plot(XYSeriesCollection data, ValueAxis xAxis, String yLabel, boolean logY) {
        XYLineAndShapeRenderer renderer = new XYLineAndShapeRenderer(true, true);
        // Small dots, all alike, and colours fixed by series index (so panels of one chart agree);
        // curves of a hundred points stay readable.
        renderer.setAutoPopulateSeriesShape(false);
        renderer.setDefaultShape(new Ellipse2D.Double(-2.5, -2.5, 5, 5));
        for (int i = 0; i < data.getSeriesCount(); i++) {
            renderer.setSeriesPaint(i, COLOURS[i % COLOURS.length]);
        }
        XYPlot plot = new XYPlot(data, xAxis, logY ? logAxis(yLabel, new DecimalFormat("0.####")) : linearAxis(yLabel),
                renderer);
        // Later series on top: a curve that continues another (a resumed run) is drawn over it.
        plot.setSeriesRenderingOrder(SeriesRenderingOrder.FORWARD);
        plot.setBackgroundPaint(Color.WHITE);
        plot.setDomainGridlinePaint(Color.LIGHT_GRAY);
        plot.setRangeGridlinePaint(Color.LIGHT_GRAY);
        return plot;
    }

    /** Base 2 with ticks at whole powers only (0.25, 1, 4, 1K, 4K): round labels, whatever the range. */
    private static LogAxis logAxis(String label, NumberFormat labels) {
        LogAxis axis = new LogAxis(label);
        axis.setBase(2);
        axis.setSmallestValue(1e-12);
        axis.setStandardTickUnits(NumberAxis.createIntegerTickUnits());
        axis.setNumberFormatOverride(labels);
        return axis;
    }

    private static NumberAxis linearAxis(String label) {
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

    /** Byte counts as nccl-tests' flags write them: 512, 4K, 16M, 1G. */
    private static final class ByteSizeFormat extends NumberFormat {
        @Override
        public StringBuffer format(double bytes, StringBuffer to, FieldPosition pos) {
            String[] units = {"", "K", "M", "G", "T"};
            int unit = 0;
            double v = bytes;
            while (v >= 1024 && unit < units.length - 1) {
                v /= 1024;
                unit++;
            }
            return to.append(String.format(Locale.ROOT, v == Math.rint(v) ? "%.0f%s" : "%.1f%s", v, units[unit]));
        }

        @Override
        public StringBuffer format(long bytes, StringBuffer to, FieldPosition pos) {
            return format((double) bytes, to, pos);
        }

        @Override
        public Number parse(String source, ParsePosition pos) {
            throw new UnsupportedOperationException("labels only");
        }
    }
}
