package org.sparkccl.tools.spark;

import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.SparkSession;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.check.CollectiveCheck;
import org.sparkccl.spark.SparkCcl;
import org.sparkccl.spark.SparkCclJobs;
import org.sparkccl.spark.SparkCclPlugin;
import org.sparkccl.spark.TaskPlacement;
import org.sparkccl.train.TrainJob;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/**
 * Checks the collectives on the cluster it runs on: one barrier stage whose tasks all-reduce every
 * type with every op at odd counts, on random data, against the float64 reference (as nccl-tests'
 * {@code -c 1}), then reduce-scatter, all-gather, broadcast and barrier. Prints one line per rank
 * and a total; exits 1 when an element was wrong. Where the ranks run (hosts, executors) is up to
 * the cluster: across hosts this checks the socket transport and the two-level all-reduce.
 */
@Command(name = "spark-collective-check", mixinStandardHelpOptions = true, sortOptions = false,
        description = "Every collective, type and op across the tasks of a barrier stage, against a float64 reference.")
public final class SparkCollectiveCheck implements Callable<Integer> {
    private static final long[] COUNTS = {1, 7, 1001, 65537};
    private static final long SEED = 0x5EC7L;

    @Option(names = "--ranks", defaultValue = "4", description = "tasks (partitions) [${DEFAULT-VALUE}]")
    int ranks;
    @Option(names = "--master", description = "Spark master; default: spark-submit's, else local[RANKS]")
    String master;
    @Parameters(paramLabel = "TRAINJOB_ARG", description = "after a clean check, run TrainJob with these arguments (after"
            + " --) in the same application, on the executors that are up already")
    List<String> trainJobArgs = List.of();

    public static void main(String[] args) {
        System.exit(new CommandLine(new SparkCollectiveCheck()).execute(args));
    }

    @Override
    public Integer call() {
        SparkSession.Builder builder = SparkSession.builder().appName("sparkccl collective check")
                .config("spark.plugins", SparkCclPlugin.class.getName());
        if (master != null || System.getProperty("spark.master") == null) {
            builder.master(master != null ? master : "local[" + ranks + "]").config("spark.ui.enabled", "false");
        }
        SparkSession spark = builder.getOrCreate();
        try {
            JavaSparkContext jsc = JavaSparkContext.fromSparkContext(spark.sparkContext());
            List<Integer> ids = IntStream.range(0, ranks).boxed().collect(Collectors.toList());
            List<long[]> perRank = SparkCclJobs.barrierMapPartitions(jsc.parallelize(ids, ranks), part -> {
                Communicator comm = SparkCcl.communicator();
                CollectiveCheck check = new CollectiveCheck(SEED, System.err).runAll(comm, COUNTS, 4099);
                long[] casesAndWrong = {check.cases(), check.wrong()};
                TaskPlacement me = SparkCcl.placements().get(comm.rank());
                System.out.printf(Locale.ROOT, "collective check rank %d of %d (%s, host %s): %d cases, %d wrong%n",
                        comm.rank(), comm.size(), me, me.hostId(), casesAndWrong[0], casesAndWrong[1]);
                return List.of(new long[] {comm.rank(), casesAndWrong[0], casesAndWrong[1]}).iterator();
            }).collect();
            long wrong = perRank.stream().mapToLong(r -> r[2]).sum();
            System.out.printf(Locale.ROOT, "collective check: %d ranks, %d cases each, %d wrong elements%n",
                    perRank.size(), perRank.get(0)[1], wrong);
            if (wrong != 0 || perRank.size() != ranks) {
                return 1;
            }
        } catch (RuntimeException e) {
            spark.stop();
            throw e;
        }
        if (trainJobArgs.isEmpty()) {
            spark.stop();
            return 0;
        }
        // TrainJob takes the running session (getOrCreate) and stops it when it is done.
        return new CommandLine(new TrainJob()).execute(trainJobArgs.toArray(new String[0]));
    }
}
