package org.sparkccl.tools.spark;

import java.awt.Color;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.concurrent.Callable;
import java.util.stream.Collectors;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.ml.Model;
import org.apache.spark.ml.classification.MultilayerPerceptronClassifier;
import org.apache.spark.ml.evaluation.MulticlassClassificationEvaluator;
import org.apache.spark.ml.feature.MaxAbsScaler;
import org.apache.spark.ml.feature.MaxAbsScalerModel;
import org.apache.spark.ml.linalg.SQLDataTypes;
import org.apache.spark.ml.linalg.Vectors;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.jfree.chart.JFreeChart;
import org.jfree.chart.LegendItemCollection;
import org.jfree.chart.axis.CategoryAxis;
import org.jfree.chart.axis.NumberAxis;
import org.jfree.chart.plot.CategoryPlot;
import org.jfree.chart.plot.CombinedDomainCategoryPlot;
import org.jfree.chart.renderer.category.BarRenderer;
import org.jfree.chart.renderer.category.StandardBarPainter;
import org.jfree.data.category.DefaultCategoryDataset;
import org.sparkccl.spark.SparkCclPlugin;
import org.sparkccl.spark.SparkCclSettings;
import org.sparkccl.spark.ml.SparkCclMlpClassificationModel;
import org.sparkccl.spark.ml.SparkCclMlpClassifier;
import org.sparkccl.train.Example;
import org.sparkccl.train.TrainingData;
import org.sparkccl.train.plot.Charts;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * sparkccl's Estimator against MLlib's {@link MultilayerPerceptronClassifier}, side by side in one
 * run: the same data, the same seeded split, the same layer sizes, on the same Spark, fitted one
 * after the other. Reports each one's accuracy on the held-out rows and the wall time of {@code fit}
 * on the bundled digits and on a generated set (a mixture of Gaussian classes, made here). Both get
 * the features through the same fitted MaxAbsScaler. A benchmark, not a test: it asserts nothing
 * about time, but it checks that every model scores every held-out row and does better than
 * chance, and fails otherwise.
 */
@Command(name = "spark-ml-bench", mixinStandardHelpOptions = true, sortOptions = false,
        description = "SparkCclMlpClassifier against MLlib's MultilayerPerceptronClassifier: validation accuracy and fit time.")
public final class SparkMlBench implements Callable<Integer> {
    @Option(names = "--ranks", defaultValue = "4", description = "sparkccl ranks; also the local[N] of the embedded Spark [${DEFAULT-VALUE}]")
    int ranks;
    @Option(names = "--master", description = "Spark master; default: spark-submit's, else local[RANKS]")
    String master;
    @Option(names = "--sets", defaultValue = "digits,generated", split = ",", description = "digits, generated [${DEFAULT-VALUE}]")
    List<String> sets;
    @Option(names = "--rows", defaultValue = "200000", description = "rows of the generated set [${DEFAULT-VALUE}]")
    int rows;
    @Option(names = "--features", defaultValue = "100", description = "features of the generated set [${DEFAULT-VALUE}]")
    int features;
    @Option(names = "--classes", defaultValue = "10", description = "classes of the generated set [${DEFAULT-VALUE}]")
    int classes;
    @Option(names = "--separation", defaultValue = "0.3",
            description = "spread of the generated class means (per feature; the noise is 1) [${DEFAULT-VALUE}]")
    double separation;
    @Option(names = "--hidden", defaultValue = "32", description = "hidden units (one layer), both models [${DEFAULT-VALUE}]")
    int hidden;
    @Option(names = "--validation-fraction", defaultValue = "0.2", description = "held-out rows [${DEFAULT-VALUE}]")
    double validationFraction;
    @Option(names = "--seed", defaultValue = "1", description = "data, split and both models' seeds [${DEFAULT-VALUE}]")
    long seed;
    // 150 steps at lr 0.02: as accurate on the held-out digits as TrainJob's 300 at 0.01 or more (0.9736
    // against 0.9683, the same split), in half the steps; docs/perf/spark-ml.md has the sweep.
    @Option(names = "--digits-steps", defaultValue = "150", description = "sparkccl steps on the digits [${DEFAULT-VALUE}]")
    int digitsSteps;
    @Option(names = "--digits-batch", defaultValue = "128", description = "sparkccl global minibatch on the digits [${DEFAULT-VALUE}]")
    int digitsBatch;
    @Option(names = "--generated-steps", defaultValue = "100", description = "sparkccl steps on the generated set [${DEFAULT-VALUE}]")
    int generatedSteps;
    @Option(names = "--generated-batch", defaultValue = "1024", description = "sparkccl global minibatch on the generated set [${DEFAULT-VALUE}]")
    int generatedBatch;
    @Option(names = "--digits-step-size", defaultValue = "0.02", description = "sparkccl's Adam learning rate on the digits [${DEFAULT-VALUE}]")
    double digitsStepSize;
    @Option(names = "--generated-step-size", defaultValue = "0.01",
            description = "sparkccl's Adam learning rate on the generated set [${DEFAULT-VALUE}]")
    double generatedStepSize;
    @Option(names = "--mllib-iters", defaultValue = "10,20,30,50,100", split = ",",
            description = "MLlib's L-BFGS iterations, one fit per value (100 is its default); the fewest within half a"
                    + " point of the best is the same-accuracy reference [${DEFAULT-VALUE}]")
    List<Integer> mllibIters;
    @Option(names = "--methods", defaultValue = "sparkccl,mllib", split = ",",
            description = "which to fit: sparkccl, mllib (both for a comparison) [${DEFAULT-VALUE}]")
    List<String> methods;
    @Option(names = "--sparkccl-bootstraps", defaultValue = "auto", split = ",",
            description = "how sparkccl's ranks meet, one sparkccl fit per value before each MLlib fit: auto (host where"
                    + " all ranks run on one host), spark (BarrierTaskContext.allGather, ~1 s), host"
                    + " (spark.sparkccl.bootstrap) [${DEFAULT-VALUE}]")
    List<String> bootstraps;
    @Option(names = "--warmup-fits", defaultValue = "2",
            description = "untimed fits of each method per data set before the timed ones (sparkccl once per bootstrap,"
                    + " MLlib at the first --mllib-iters), so that the times compared are the JIT-warm ones; their times"
                    + " are printed and kept in the config column [${DEFAULT-VALUE}]")
    int warmupFits;
    @Option(names = "--plot", paramLabel = "FILE", description = "draw fit time and validation accuracy of both into FILE (PNG)")
    Path plot;
    @Option(names = "--csv", paramLabel = "FILE", description = "write the results as CSV")
    Path csv;
    @Option(names = "--from-csv", paramLabel = "FILE", description = "fit nothing: print and plot the results of an earlier --csv")
    Path fromCsv;

    public static void main(String[] args) {
        System.exit(new CommandLine(new SparkMlBench()).execute(args));
    }

    /** The benchmark with these command-line options (the rest at their defaults), to run from code: {@link #compare}. */
    public static SparkMlBench withOptions(String... args) {
        SparkMlBench bench = new SparkMlBench();
        new CommandLine(bench).parseArgs(args);
        return bench;
    }

    /** Reads results written with {@code --csv}. */
    public static List<Result> readCsv(Path file) throws IOException {
        List<Result> out = new ArrayList<>();
        for (String line : Files.readAllLines(file).subList(1, Files.readAllLines(file).size())) {
            String[] cells = line.split(",", 7);
            out.add(new Result(cells[0], cells[1], Long.parseLong(cells[2]), Long.parseLong(cells[3]),
                    Double.parseDouble(cells[4]), Double.parseDouble(cells[5]), cells[6].replaceAll("^\"|\"$", "")));
        }
        return out;
    }

    /** The job property that picks the bootstrap of one fit's barrier stage. */
    private static final String BOOTSTRAP_PROPERTY = SparkCclSettings.BOOTSTRAP.sparkConfKey();

    /** One model's result on one data set. */
    public record Result(String set, String method, long trainRows, long validationRows, double fitSeconds,
                         double validationAccuracy, String config) {
        Result withConfig(String newConfig) {
            return new Result(set, method, trainRows, validationRows, fitSeconds, validationAccuracy, newConfig);
        }
    }

    @Override
    public Integer call() throws IOException {
        if (fromCsv != null) {
            List<Result> recorded = readCsv(fromCsv);
            System.out.println(table(recorded));
            if (plot != null) {
                Charts.writePng(chart(recorded), plot);
                System.out.println("plot: " + plot);
            }
            return 0;
        }
        for (String b : bootstraps) {
            if (!List.of("auto", "spark", "host").contains(b)) {
                throw new CommandLine.ParameterException(new CommandLine(this), "--sparkccl-bootstraps: '" + b
                        + "' is not auto, spark or host");
            }
        }
        SparkSession.Builder builder = SparkSession.builder().appName("sparkccl ML benchmark")
                .config("spark.plugins", SparkCclPlugin.class.getName());
        if (master != null || System.getProperty("spark.master") == null) {
            builder.master(master != null ? master : "local[" + ranks + "]").config("spark.ui.enabled", "false");
            org.apache.logging.log4j.core.config.Configurator.setRootLevel(org.apache.logging.log4j.Level.WARN);
        }
        SparkSession spark = builder.getOrCreate();
        try {
            System.out.printf(Locale.ROOT, "master %s, %d cores here, %d sparkccl ranks%n", spark.sparkContext().master(),
                    Runtime.getRuntime().availableProcessors(), ranks);
            List<Result> results = new ArrayList<>();
            for (String set : sets) {
                results.addAll(compare(spark, set));
            }
            System.out.println();
            System.out.println(table(results));
            if (csv != null) {
                StringBuilder out = new StringBuilder("set,method,train_rows,validation_rows,fit_seconds,validation_accuracy,config\n");
                for (Result r : results) {
                    out.append(String.format(Locale.ROOT, "%s,%s,%d,%d,%.3f,%.4f,\"%s\"%n", r.set(), r.method(), r.trainRows(),
                            r.validationRows(), r.fitSeconds(), r.validationAccuracy(), r.config()));
                }
                Files.writeString(csv, out);
            }
            if (plot != null) {
                Charts.writePng(chart(results), plot);
                System.out.println("plot: " + plot);
            }
            return 0;
        } finally {
            spark.stop();
        }
    }

    /** Both models on data set {@code set} ("digits" or "generated"): sparkccl's result, then MLlib's. */
    public List<Result> compare(SparkSession spark, String set) {
        Dataset<Row> raw;
        int steps;
        int batch;
        double stepSize;
        switch (set) {
            case "digits":
                raw = digits(spark);
                steps = digitsSteps;
                batch = digitsBatch;
                stepSize = digitsStepSize;
                break;
            case "generated":
                raw = generated(spark, rows, features, classes, separation, seed, ranks);
                steps = generatedSteps;
                batch = generatedBatch;
                stepSize = generatedStepSize;
                break;
            default:
                throw new IllegalArgumentException("unknown set '" + set + "': use digits or generated");
        }
        Dataset<Row>[] split = raw.randomSplit(new double[] {1 - validationFraction, validationFraction}, seed);
        MaxAbsScalerModel scaler = new MaxAbsScaler().setInputCol("raw").setOutputCol("features").fit(split[0]);
        Dataset<Row> train = scaler.transform(split[0]).select("features", "label").repartition(ranks).cache();
        Dataset<Row> validation = scaler.transform(split[1]).select("features", "label").cache();
        long trainRows = train.count();
        long validationRows = validation.count();
        int inputs = ((org.apache.spark.ml.linalg.Vector) train.first().get(0)).size();
        int numClasses = (int) train.agg(org.apache.spark.sql.functions.max("label")).first().getDouble(0) + 1;
        System.out.printf(Locale.ROOT, "%n%s: %d training rows, %d held out, %d features, %d classes; layers %d-%d-%d%n",
                set, trainRows, validationRows, inputs, numClasses, inputs, hidden, numClasses);

        SparkCclMlpClassifier ccl = new SparkCclMlpClassifier().setHiddenLayers(new int[] {hidden}).setMaxIter(steps)
                .setBatchSize(batch).setStepSize(stepSize).setSeed(seed).setNumRanks(ranks);
        String oursConfig = String.format(Locale.ROOT, "%d ranks, Adam lr %g, %d steps of %d rows (%.1f epochs), tanh",
                ranks, stepSize, steps, batch, steps * (double) batch / trainRows);
        List<Integer> iterations = methods.contains("mllib") ? mllibIters : List.of();
        // Warm-up first (the measuring rule: compare after the JIT has warmed up, and say what the first
        // fits cost): a fresh JVM's first fits of either model take several times a warm one's.
        Map<String, List<Result>> oursWarmup = new LinkedHashMap<>();
        List<Result> theirsWarmup = new ArrayList<>();
        for (int w = 0; w < warmupFits; w++) {
            System.out.printf(Locale.ROOT, "  warm-up fit %d of %d (untimed in the results)%n", w + 1, warmupFits);
            if (methods.contains("sparkccl")) {
                fitOursOncePerBootstrap(oursWarmup, set, ccl, train, validation, trainRows, validationRows, oursConfig);
            }
            if (!iterations.isEmpty()) {
                theirsWarmup.add(fitMllib(set, iterations.get(0), inputs, numClasses, train, validation, trainRows, validationRows));
            }
        }
        // sparkccl fits once per bootstrap before each MLlib fit, so that each group runs under the same machine load.
        Map<String, List<Result>> ours = new LinkedHashMap<>();
        List<Result> theirs = new ArrayList<>();
        for (int i = 0; i < Math.max(1, iterations.size()); i++) {
            if (methods.contains("sparkccl")) {
                fitOursOncePerBootstrap(ours, set, ccl, train, validation, trainRows, validationRows, oursConfig);
            }
            if (i < iterations.size()) {
                Result mllib = fitMllib(set, iterations.get(i), inputs, numClasses, train, validation, trainRows, validationRows);
                theirs.add(i == 0 ? withWarmup(mllib, theirsWarmup) : mllib);
            }
        }
        List<Result> out = new ArrayList<>();
        for (Map.Entry<String, List<Result>> fits : ours.entrySet()) {
            out.add(withWarmup(median(fits.getValue()), oursWarmup.getOrDefault(fits.getKey(), List.of())));
        }
        out.addAll(theirs);
        train.unpersist();
        validation.unpersist();
        return out;
    }

    /** One sparkccl fit per bootstrap, each added to {@code fitsByBootstrap} under its bootstrap. */
    private void fitOursOncePerBootstrap(Map<String, List<Result>> fitsByBootstrap, String set, SparkCclMlpClassifier ccl,
                                         Dataset<Row> train, Dataset<Row> validation, long trainRows, long validationRows,
                                         String oursConfig) {
        for (String bootstrap : bootstraps) {
            // A job property: this fit's barrier stage meets through this bootstrap, the others as they were.
            train.sparkSession().sparkContext().setLocalProperty(BOOTSTRAP_PROPERTY, bootstrap);
            try {
                fitsByBootstrap.computeIfAbsent(bootstrap, b -> new ArrayList<>()).add(fitAndScore(set,
                        "sparkccl SparkCclMlpClassifier (bootstrap " + bootstrap + ")", ccl, train, validation,
                        trainRows, validationRows, oursConfig + ", bootstrap " + bootstrap));
            } finally {
                train.sparkSession().sparkContext().setLocalProperty(BOOTSTRAP_PROPERTY, null);
            }
        }
    }

    private Result fitMllib(String set, int iters, int inputs, int numClasses, Dataset<Row> train, Dataset<Row> validation,
                            long trainRows, long validationRows) {
        MultilayerPerceptronClassifier mllib = new MultilayerPerceptronClassifier()
                .setLayers(new int[] {inputs, hidden, numClasses}).setMaxIter(iters).setSeed(seed);
        return fitAndScore(set, "MLlib MultilayerPerceptronClassifier (maxIter " + iters + ")", mllib, train,
                validation, trainRows, validationRows, String.format(Locale.ROOT,
                        "L-BFGS, maxIter %d, tol %g, blockSize %d, sigmoid", iters, mllib.getTol(), mllib.getBlockSize()));
    }

    /** {@code r} with the times of the untimed warm-up fits that came before it in its config. */
    static Result withWarmup(Result r, List<Result> warmup) {
        if (warmup.isEmpty()) {
            return r;
        }
        String times = warmup.stream().map(w -> String.format(Locale.ROOT, "%.2f", w.fitSeconds()))
                .collect(Collectors.joining(", "));
        String what = warmup.get(0).method().startsWith("sparkccl") ? "" : " at maxIter " + iterations(warmup.get(0));
        return r.withConfig(String.format(Locale.ROOT, "%s; after %d untimed warm-up fit%s%s (%s s)", r.config(),
                warmup.size(), warmup.size() == 1 ? "" : "s", what, times));
    }

    private <M extends Model<M>> Result fitAndScore(String set, String method, org.apache.spark.ml.Estimator<M> estimator,
                                                    Dataset<Row> train, Dataset<Row> validation, long trainRows,
                                                    long validationRows, String config) {
        long start = System.nanoTime();
        M model = estimator.fit(train);
        double seconds = (System.nanoTime() - start) / 1e9;
        Dataset<Row> scored = model.transform(validation).cache();
        long scoredRows = scored.count();
        if (scoredRows != validationRows) {
            throw new IllegalStateException(method + " on " + set + " scored " + scoredRows + " of " + validationRows
                    + " held-out rows");
        }
        double accuracy = new MulticlassClassificationEvaluator().setMetricName("accuracy").evaluate(scored);
        scored.unpersist();
        long distinct = validation.select("label").distinct().count();
        if (!(accuracy > 1.5 / distinct)) {
            throw new IllegalStateException(method + " on " + set + ": validation accuracy " + accuracy
                    + " is no better than chance (1/" + distinct + "); the model did not learn");
        }
        if (model instanceof SparkCclMlpClassificationModel ours) {
            double[] losses = ours.summary().lossHistory();
            System.out.printf(Locale.ROOT, "  %s: loss %.4f (step 1) -> %.4f (step %d)%n", method, losses[0],
                    losses[losses.length - 1], losses.length);
        }
        System.out.printf(Locale.ROOT, "  %s: fit %.2f s, validation accuracy %.4f (%s)%n", method, seconds, accuracy, config);
        return new Result(set, method, trainRows, validationRows, seconds, accuracy, config);
    }

    /**
     * The fit of median time among sparkccl's (the same seed gives the same model each time, so only
     * the time differs), its config saying how many there were.
     */
    static Result median(List<Result> fits) {
        List<Result> byTime = new ArrayList<>(fits);
        byTime.sort((a, b) -> Double.compare(a.fitSeconds(), b.fitSeconds()));
        Result m = byTime.get(byTime.size() / 2);
        if (fits.size() == 1) {
            return m;
        }
        return m.withConfig(String.format(Locale.ROOT, "%s; median of %d fits, %.2f-%.2f s, one before each MLlib fit",
                m.config(), fits.size(), byTime.get(0).fitSeconds(), byTime.get(byTime.size() - 1).fitSeconds()));
    }

    /**
     * MLlib's fit on {@code set} with the fewest iterations whose validation accuracy is within
     * {@value #SAME_ACCURACY} of MLlib's best there: what "as accurate as MLlib" costs MLlib.
     */
    static Result mllibAtItsBestAccuracy(List<Result> results, String set) {
        List<Result> mllib = results.stream().filter(r -> r.set().equals(set) && !r.method().startsWith("sparkccl")).toList();
        double best = mllib.stream().mapToDouble(Result::validationAccuracy).max().orElse(Double.NaN);
        return mllib.stream().filter(r -> r.validationAccuracy() >= best - SAME_ACCURACY)
                .min((a, b) -> Integer.compare(iterations(a), iterations(b))).orElse(null);
    }

    /** Half a point of accuracy: the "the same accuracy". */
    static final double SAME_ACCURACY = 0.005;

    private static int iterations(Result mllib) {
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("maxIter (\\d+)").matcher(mllib.method());
        return m.find() ? Integer.parseInt(m.group(1)) : Integer.MAX_VALUE;
    }

    /** A Markdown table of the results, with sparkccl's speed-up and accuracy difference per set. */
    public static String table(List<Result> results) {
        StringBuilder out = new StringBuilder();
        out.append("| data | method | training / held-out rows | fit (s) | validation accuracy | config |\n");
        out.append("| --- | --- | ---: | ---: | ---: | --- |\n");
        for (Result r : results) {
            out.append(String.format(Locale.ROOT, "| %s | %s | %d / %d | %.2f | %.4f | %s |%n", r.set(), r.method(),
                    r.trainRows(), r.validationRows(), r.fitSeconds(), r.validationAccuracy(), r.config()));
        }
        for (Result ours : results) {
            for (Result theirs : results) {
                if (ours.set().equals(theirs.set()) && ours.method().startsWith("sparkccl") && !theirs.method().startsWith("sparkccl")) {
                    out.append(String.format(Locale.ROOT, "%n%s: sparkccl's fit %.1fx faster than %s's; validation"
                                    + " accuracy %+.2f points", ours.set(), theirs.fitSeconds() / ours.fitSeconds(),
                            theirs.method(), 100 * (ours.validationAccuracy() - theirs.validationAccuracy())));
                }
            }
            Result reference = ours.method().startsWith("sparkccl") ? mllibAtItsBestAccuracy(results, ours.set()) : null;
            if (reference != null) {
                out.append(String.format(Locale.ROOT, "%n%s, at the same accuracy: MLlib's fewest iterations within %.1f"
                                + " points of its best are maxIter %d (%.4f, %.2f s); sparkccl %.4f (%+.2f points) in %.2f s:"
                                + " %.1fx faster", ours.set(), 100 * SAME_ACCURACY, iterations(reference),
                        reference.validationAccuracy(), reference.fitSeconds(), ours.validationAccuracy(),
                        100 * (ours.validationAccuracy() - reference.validationAccuracy()), ours.fitSeconds(),
                        reference.fitSeconds() / ours.fitSeconds()));
            }
        }
        return out.toString();
    }

    /** Fit time (log scale) above, validation accuracy below, one bar per method and data set. */
    public static JFreeChart chart(List<Result> results) {
        DefaultCategoryDataset time = new DefaultCategoryDataset();
        DefaultCategoryDataset accuracy = new DefaultCategoryDataset();
        for (Result r : results) {
            String method = r.method().startsWith("sparkccl")
                    ? r.method().replace("sparkccl SparkCclMlpClassifier", "sparkccl").replace("(", "").replace(")", "")
                    : r.method().replace("MLlib MultilayerPerceptronClassifier", "MLlib").replace("(", "").replace(")", "");
            String set = r.set() + " (" + r.trainRows() + " rows)";
            time.addValue(r.fitSeconds(), method, set);
            accuracy.addValue(r.validationAccuracy(), method, set);
        }
        NumberAxis seconds = new NumberAxis("fit wall time (s)");
        CategoryPlot top = new CategoryPlot(time, null, seconds, bars(time));
        NumberAxis share = new NumberAxis("validation accuracy");
        share.setAutoRangeIncludesZero(false);
        share.setRange(Math.max(0, results.stream().mapToDouble(Result::validationAccuracy).min().orElse(0) - 0.05), 1.0);
        CategoryPlot bottom = new CategoryPlot(accuracy, null, share, bars(accuracy));
        bottom.setFixedLegendItems(new LegendItemCollection()); // the same series as the top panel's
        CombinedDomainCategoryPlot plot = new CombinedDomainCategoryPlot(new CategoryAxis("data set"));
        plot.add(top, 1);
        plot.add(bottom, 1);
        JFreeChart chart = new JFreeChart("SparkCclMlpClassifier vs MLlib MultilayerPerceptronClassifier",
                JFreeChart.DEFAULT_TITLE_FONT, plot, true);
        chart.setBackgroundPaint(Color.WHITE);
        return chart;
    }

    private static BarRenderer bars(DefaultCategoryDataset data) {
        BarRenderer renderer = new BarRenderer();
        renderer.setBarPainter(new StandardBarPainter());
        renderer.setShadowVisible(false);
        // Paints by series (sparkccl's from dark to light blue, MLlib's from light to dark orange-red), so that
        // both panels colour each method alike however many sparkccl bootstraps the run compared.
        int[] blues = {0x1f77b4, 0x9ecae1, 0x6baed6};
        int[] oranges = {0xffdd99, 0xffbb78, 0xff9933, 0xff7f0e, 0xd62728, 0x8c1d18};
        int ours = 0;
        int theirs = 0;
        for (int i = 0; i < data.getRowCount(); i++) {
            boolean sparkccl = data.getRowKey(i).toString().startsWith("sparkccl");
            int paint = sparkccl ? blues[ours++ % blues.length] : oranges[theirs++ % oranges.length];
            renderer.setSeriesPaint(i, new Color(paint));
        }
        return renderer;
    }

    /** The bundled digits: raw (an ML vector of the 64 pixels) and label. */
    public static Dataset<Row> digits(SparkSession spark) {
        List<Row> out = new ArrayList<>();
        for (Example e : TrainingData.digitsExamples()) {
            double[] x = new double[e.features().length];
            for (int i = 0; i < x.length; i++) {
                x[i] = e.features()[i];
            }
            out.add(RowFactory.create(Vectors.dense(x), (double) e.label()));
        }
        return spark.createDataFrame(out, schema());
    }

    /**
     * {@code rows} rows of {@code features} features in {@code classes} classes: class c's rows are
     * its mean (each feature drawn once from N(0, separation^2)) plus N(0, 1) noise, the class drawn
     * uniformly. Made on the executors, the same for the same seed.
     */
    public static Dataset<Row> generated(SparkSession spark, int rows, int features, int classes, double separation,
                                         long seed, int partitions) {
        SplittableRandom means = new SplittableRandom(seed);
        double[][] mean = new double[classes][features];
        for (double[] m : mean) {
            for (int i = 0; i < features; i++) {
                m[i] = means.nextDouble(-1, 1) * separation * Math.sqrt(3); // uniform, variance separation^2
            }
        }
        JavaRDD<Row> made = spark.range(0, rows, 1, partitions).javaRDD().map(id -> {
            SplittableRandom random = new SplittableRandom(seed * 0x9E3779B97F4A7C15L + id);
            int c = random.nextInt(classes);
            double[] x = new double[features];
            for (int i = 0; i < features; i++) {
                x[i] = mean[c][i] + random.nextGaussian();
            }
            return RowFactory.create(Vectors.dense(x), (double) c);
        });
        return spark.createDataFrame(made, schema());
    }

    private static StructType schema() {
        return new StructType().add("raw", SQLDataTypes.VectorType(), false).add("label", DataTypes.DoubleType, false);
    }
}
