package org.sparkccl.spark;

import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.BarrierTaskContext;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.resource.ResourceInformation;
import org.apache.spark.util.TaskCompletionListener;
import org.apache.spark.util.TaskFailureListener;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.PeerFailedException;
import org.sparkccl.core.engine.Engines;
import org.sparkccl.core.param.Params;
import org.sparkccl.core.transport.HostIdentity;

/**
 * The entry point inside a barrier task:
 *
 * <pre>{@code
 * Communicator comm = SparkCcl.communicator();   // once per task; costs one bootstrap round
 * for (...) { gradients.allReduce(comm, ReduceOp.SUM); }
 * }</pre>
 *
 * The communicator belongs to the task: every call in one task attempt returns the same one, and
 * it is closed when the task completes (successfully or not). It is bound to the task's GPU where
 * there is one (see {@link GpuBinding}); a Spark task kill makes a waiting collective fail at once,
 * and a task that fails or is killed between collectives aborts its communicator, so that peers
 * waiting for it fail at once naming it and why.
 */
public final class SparkCcl {
    private static final Logger LOG = LoggerFactory.getLogger(SparkCcl.class);
    private static final Map<Long, TaskCommunicator> OPEN = new ConcurrentHashMap<>();

    private SparkCcl() {
    }

    /** One task's communicator, with what was decided while building it. */
    private static final class TaskCommunicator {
        final MeteredCommunicator communicator;
        final PlacementBootstrap bootstrap;
        final GpuBinding gpu;
        final StageBootstrap.Kind bootstrapKind;
        final long buildMillis;

        TaskCommunicator(MeteredCommunicator communicator, PlacementBootstrap bootstrap, GpuBinding gpu,
                         StageBootstrap.Kind bootstrapKind, long buildMillis) {
            this.communicator = communicator;
            this.bootstrap = bootstrap;
            this.gpu = gpu;
            this.bootstrapKind = bootstrapKind;
            this.buildMillis = buildMillis;
        }
    }

    /** The communicator of the current barrier task, built on first call (every task of the stage must call it). */
    public static Communicator communicator() {
        BarrierTaskContext context = barrierContext("SparkCcl.communicator()");
        TaskCommunicator existing = OPEN.get(context.taskAttemptId());
        if (existing != null) {
            return existing.communicator;
        }
        TaskCommunicator built = build(context);
        OPEN.put(context.taskAttemptId(), built);
        return built.communicator;
    }

    /** Where every rank of the current task's communicator runs, by rank. */
    public static List<TaskPlacement> placements() {
        return current("SparkCcl.placements()").bootstrap.placements();
    }

    /** The GPU the current task's communicator is bound to. */
    public static GpuBinding gpu() {
        return current("SparkCcl.gpu()").gpu;
    }

    /** The bootstrap the current task's communicator was built through (see {@link SparkCclSettings#BOOTSTRAP}). */
    public static StageBootstrap.Kind bootstrapKind() {
        return current("SparkCcl.bootstrapKind()").bootstrapKind;
    }

    /** Milliseconds that building the current task's communicator took, bootstrap round included. */
    public static long buildMillis() {
        return current("SparkCcl.buildMillis()").buildMillis;
    }

    /** Communicators of tasks still running in this JVM (the executor plugin closes them at shutdown). */
    static int openCount() {
        return OPEN.size();
    }

    /** Closes every communicator still open in this JVM: for executor shutdown. */
    static void closeAll() {
        CleanupSteps steps = new CleanupSteps();
        for (Map.Entry<Long, TaskCommunicator> e : OPEN.entrySet()) {
            steps.add("close communicator of task attempt " + e.getKey(), () -> {
                OPEN.remove(e.getKey());
                e.getValue().communicator.close();
            });
        }
        steps.runAll();
    }

    private static TaskCommunicator current(String what) {
        BarrierTaskContext context = barrierContext(what);
        TaskCommunicator existing = OPEN.get(context.taskAttemptId());
        if (existing == null) {
            throw new IllegalStateException(what + ": this task has no communicator yet; call SparkCcl.communicator() first");
        }
        return existing;
    }

    private static BarrierTaskContext barrierContext(String what) {
        TaskContext context = TaskContext.get();
        if (context == null) {
            throw new IllegalStateException(what + " works inside a Spark task; this thread runs none (the driver, or a"
                    + " thread the task started)");
        }
        if (!(context instanceof BarrierTaskContext)) {
            throw new IllegalStateException(what + " needs a barrier stage, so that all ranks run at once: use"
                    + " SparkCclJobs.barrierMapPartitions(...) or rdd.barrier().mapPartitions(...)");
        }
        return (BarrierTaskContext) context;
    }

    private static TaskCommunicator build(BarrierTaskContext context) {
        long startNs = System.nanoTime();
        SparkEnv env = SparkEnv.get();
        Params params = SparkCclSettings.withExecutorSocketAddress(
                SparkCclSettings.withJobProperties(SparkCclSettings.forCurrentProcess(), context),
                env.blockManager().blockManagerId().host());
        int rank = context.partitionId();
        int size = context.numPartitions();
        String master = env.conf().get("spark.master", "");
        ResourceInformation sparkGpu = context.resourcesJMap().get("gpu");
        GpuBinding gpu = GpuBinding.decide(rank, size, sparkGpu == null ? null : sparkGpu.addresses(),
                SparkConfCheck.isLocalMaster(master), Engines.visibleGpus(),
                params.get(SparkCclSettings.ALLOW_SHARED_GPU));
        if (gpu.source() == GpuBinding.Source.LOCAL_ROUND_ROBIN) {
            LOG.info("sparkccl rank {} of {}: Spark's local mode assigns no GPUs, so this rank takes GPU {}"
                    + " (rank mod {} visible GPUs)", rank, size, gpu.address(), Engines.visibleGpus());
        }
        // Every rank states its engine in its placement, so that ranks that would choose differently fail together.
        Engines.Kind engineKind = Engines.choose(rank, gpu.hasGpu(), params);
        TaskPlacement mine = new TaskPlacement(rank, env.executorId(), HostIdentity.hostId(params), HostIdentity.pid(), gpu,
                engineKind.name());
        // Every rank reads the same task addresses, so every rank picks the same bootstrap with no round trip.
        StageBootstrap.Kind bootstrapKind = StageBootstrap.decide(params.get(SparkCclSettings.BOOTSTRAP),
                StageBootstrap.taskAddresses(context));
        // Read on the task's thread, where the Spark task that runs this stage is on the stack.
        StageRetry stage = StageRetry.of(context);
        // A killed barrier task is not interrupted by Spark (only marked): the engine polls this while it waits.
        Communicator engine;
        PlacementBootstrap bootstrap = new PlacementBootstrap(StageBootstrap.open(bootstrapKind, context,
                env.conf().getAppId(), params, context::isInterrupted), mine,
                params.get(SparkCclSettings.ALLOW_SHARED_GPU));
        try {
            engine = Engines.create(engineKind, bootstrap, gpu.hasGpu() ? gpu.ordinal() : -1, params,
                    context::isInterrupted);
        } catch (PeerFailedException e) {
            throw stage.explain(e);
        } finally {
            // The engines make their rounds while they are built and keep no bootstrap: it can go now (the
            // host bootstrap's last rank out removes its directory).
            bootstrap.close();
        }
        long buildMillis = (System.nanoTime() - startNs) / 1_000_000;
        MeteredCommunicator communicator = new MeteredCommunicator(engine, stage);
        long attempt = context.taskAttemptId();
        // Runs before the completion listener below: a task that fails or is killed between collectives
        // tells its peers so, instead of their finding it closed (or waiting for it) later.
        context.addTaskFailureListener(new TaskFailureListener() {
            @Override
            public void onTaskFailure(TaskContext failed, Throwable error) {
                communicator.abort(failed.isInterrupted()
                        ? "its Spark task was killed (" + failed.getKillReason().getOrElse(() -> "no reason given")
                                + ") between collectives"
                        : "its Spark task failed between collectives: " + error);
            }
        });
        context.addTaskCompletionListener(new TaskCompletionListener() {
            @Override
            public void onTaskCompletion(TaskContext finished) {
                TaskCommunicator removed = OPEN.remove(attempt);
                if (removed != null) {
                    removed.communicator.close();
                }
            }
        });
        LOG.info("sparkccl rank {} of {} ready on {}; {} (stage {} attempt {}, {}; {} memory; built in {} ms through"
                + " the {} bootstrap)", rank, size, mine, engine.layout(), context.stageId(), context.stageAttemptNumber(),
                stage, engine.memoryKind(), buildMillis, bootstrapKind.name().toLowerCase(Locale.ROOT));
        return new TaskCommunicator(communicator, bootstrap, gpu, bootstrapKind, buildMillis);
    }
}
