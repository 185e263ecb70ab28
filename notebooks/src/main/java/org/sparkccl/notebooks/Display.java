package org.sparkccl.notebooks;

import io.github.spencerpark.jupyter.kernel.BaseKernel;
import io.github.spencerpark.jupyter.kernel.display.DisplayData;
import io.github.spencerpark.jupyter.kernel.display.mime.MIMEType;
import java.util.Base64;
import java.util.List;
import org.jfree.chart.JFreeChart;
import org.sparkccl.train.plot.Charts;

/**
 * What a notebook cell calls to show something other than text: HTML, a table, a PNG, a chart.
 * Each call adds one display_data output to the running cell.
 */
public final class Display {
    private static volatile BaseKernel kernel;

    private Display() {
    }

    static void attach(BaseKernel running) {
        kernel = running;
    }

    /** Shows HTML. */
    public static void html(String html) {
        DisplayData data = new DisplayData(html.replaceAll("<[^>]*>", " ").replaceAll("\\s+", " ").trim());
        data.putHTML(html);
        show(data);
    }

    /** Shows a table: a header row and rows of cells (each shown with toString, HTML-escaped). */
    public static void table(List<String> header, List<? extends List<?>> rows) {
        StringBuilder html = new StringBuilder("<table>\n<tr>");
        for (String h : header) {
            html.append("<th>").append(escape(h)).append("</th>");
        }
        html.append("</tr>\n");
        for (List<?> row : rows) {
            html.append("<tr>");
            for (Object cell : row) {
                html.append("<td>").append(escape(String.valueOf(cell))).append("</td>");
            }
            html.append("</tr>\n");
        }
        html(html.append("</table>").toString());
    }

    /** Shows a PNG image. */
    public static void png(byte[] png) {
        DisplayData data = new DisplayData("[PNG image, " + png.length + " bytes]");
        data.putData(MIMEType.IMAGE_PNG, Base64.getEncoder().encodeToString(png));
        show(data);
    }

    /** Shows a chart as a PNG of the size sparkccl's tools write. */
    public static void chart(JFreeChart chart) {
        png(Charts.png(chart));
    }

    private static void show(DisplayData data) {
        BaseKernel running = kernel;
        if (running == null) {
            throw new IllegalStateException("Display works inside the sparkccl Jupyter kernel only; "
                    + "run this code in a notebook cell (bin/notebook-kernel install)");
        }
        running.display(data);
    }

    private static String escape(String s) {
        return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;");
    }
}
