package org.sparkccl.train;

import java.util.Map;
import org.jfree.chart.JFreeChart;
import org.jfree.data.xy.XYSeries;
import org.jfree.data.xy.XYSeriesCollection;
import org.sparkccl.train.plot.Charts;

/** Loss curves of training runs: one line per run, minibatch loss against the step it was computed at. */
public final class LossChart {
    private LossChart() {
    }

    /** A chart of each run's losses, named by the map's keys, in the map's order. */
    public static JFreeChart of(String title, Map<String, TrainResult> runs) {
        XYSeriesCollection data = new XYSeriesCollection();
        for (Map.Entry<String, TrainResult> run : runs.entrySet()) {
            XYSeries series = new XYSeries(run.getKey(), false, true);
            double[] losses = run.getValue().losses();
            // A resumed run's first loss is the checkpoint's next step, so its curve continues where the checkpoint was.
            for (int i = 0; i < losses.length; i++) {
                series.add(run.getValue().firstStep() + i, losses[i]);
            }
            data.addSeries(series);
        }
        return Charts.lines(title, "step", false, "minibatch loss", false, data);
    }
}
