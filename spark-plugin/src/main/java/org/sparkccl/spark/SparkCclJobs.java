package org.sparkccl.spark;

import java.io.Serializable;
import java.util.Iterator;
import org.apache.spark.HashPartitioner;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoder;
import scala.Tuple2;
import scala.jdk.javaapi.CollectionConverters;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;
import scala.runtime.AbstractFunction1;

/**
 * Barrier stages from Java without ClassTags or Scala function types. In {@code fn}, call
 * {@link SparkCcl#communicator()} to get the stage's communicator. The stage's configuration is
 * checked on the driver first (see {@link SparkConfCheck#checkBarrierStage}).
 *
 * <pre>{@code
 * JavaRDD<Double> losses = SparkCclJobs.barrierMapPartitions(rows, part -> {
 *     Communicator comm = SparkCcl.communicator();
 *     ...
 *     return List.of(loss).iterator();
 * });
 * }</pre>
 *
 * <p><b>Failures.</b> Spark retries a failed barrier stage as a whole only when it is a
 * ShuffleMapStage (its output feeds a shuffle); a failed barrier ResultStage aborts the job
 * ("Could not recover from a failed barrier ResultStage"). So {@code barrierMapPartitions(...).collect()}
 * fails the job when an executor is lost, while {@link #retryableBarrierMapPartitions} builds the
 * stage so that Spark retries it, up to {@code spark.stage.maxConsecutiveAttempts} attempts (default
 * 4). A rank whose peer dies says which of the two applies in its {@link org.sparkccl.core.PeerFailedException}.
 */
public final class SparkCclJobs {
    private SparkCclJobs() {
    }

    /**
     * {@code rdd.barrier().mapPartitions(fn)}: every partition runs at once, as one rank each.
     *
     * <p>Not retried on failure when an action reads it directly ({@code collect()}, {@code count()},
     * ...): that makes it a barrier ResultStage, and a lost executor or failed rank then fails the job.
     * Use {@link #retryableBarrierMapPartitions} for a stage that Spark retries.
     */
    public static <T, U> JavaRDD<U> barrierMapPartitions(JavaRDD<T> rdd, FlatMapFunction<Iterator<T>, U> fn) {
        SparkConfCheck.checkBarrierStage(rdd.context().getConf(), rdd.getNumPartitions());
        RDD<U> result = rdd.rdd().barrier().mapPartitions(new PartitionFunction<>(fn), false, anyRef());
        return JavaRDD.fromRDD(result, anyRef());
    }

    /**
     * A barrier {@code mapPartitions} that Spark retries as a whole when it fails (a lost executor, a
     * failed rank): the barrier stage writes its output to a shuffle, which makes it a ShuffleMapStage,
     * and the returned RDD reads it back, partition r holding rank r's output in the order {@code fn}
     * produced it. Spark runs at most {@code spark.stage.maxConsecutiveAttempts} attempts (default 4)
     * before it fails the job; every attempt starts every rank again from the beginning of {@code fn}
     * with a new communicator ({@code BarrierTaskContext.get().stageAttemptNumber()} is 0 for the first
     * attempt, so {@code fn} can resume from a checkpoint on a retry, as TrainJob does).
     *
     * <p>The output passes through Spark's shuffle (serialized, on the executors' local disks): meant
     * for results, losses and models, not for bulk data. A retry also reruns the stages that compute
     * {@code rdd} where their output was lost with the executor (persist it to keep that short).
     */
    public static <T, U> JavaRDD<U> retryableBarrierMapPartitions(JavaRDD<T> rdd, FlatMapFunction<Iterator<T>, U> fn) {
        int ranks = rdd.getNumPartitions();
        SparkConfCheck.checkBarrierStage(rdd.context().getConf(), ranks);
        RDD<Tuple2<Integer, U>> byRank = rdd.rdd().barrier().mapPartitions(new RankKeyedFunction<>(fn), false, anyRef());
        // Keys are the ranks 0..n-1, so the hash partitioner sends rank r's output to partition r; with one
        // map task per reduce partition the shuffle keeps its order.
        JavaPairRDD<Integer, U> keyed = JavaPairRDD.fromRDD(byRank, anyRef(), anyRef());
        return keyed.partitionBy(new HashPartitioner(ranks)).values();
    }

    /**
     * {@link #retryableBarrierMapPartitions(JavaRDD, FlatMapFunction)} over a Dataset: one rank per
     * partition, the barrier stage retried by Spark as a whole; {@code encoder} describes the output.
     */
    public static <T, U> Dataset<U> retryableBarrierMapPartitions(Dataset<T> dataset, MapPartitionsFunction<T, U> fn,
                                                                 Encoder<U> encoder) {
        JavaRDD<U> out = retryableBarrierMapPartitions(dataset.toJavaRDD(), fn::call);
        return dataset.sparkSession().createDataset(out.rdd(), encoder);
    }

    /** A barrier {@code mapPartitions} over a Dataset: one rank per partition; {@code encoder} describes the output. */
    public static <T, U> Dataset<U> barrierMapPartitions(Dataset<T> dataset, MapPartitionsFunction<T, U> fn,
                                                        Encoder<U> encoder) {
        JavaRDD<U> out = barrierMapPartitions(dataset.toJavaRDD(), fn::call);
        return dataset.sparkSession().createDataset(out.rdd(), encoder);
    }

    @SuppressWarnings("unchecked")
    private static <X> ClassTag<X> anyRef() {
        return (ClassTag<X>) ClassTag$.MODULE$.AnyRef();
    }

    /** The user's function, its output keyed by rank, in a task marked as one of a retryable stage. */
    private static final class RankKeyedFunction<T, U>
            extends AbstractFunction1<scala.collection.Iterator<T>, scala.collection.Iterator<Tuple2<Integer, U>>>
            implements Serializable {
        private static final long serialVersionUID = 1L;
        private final PartitionFunction<T, U> fn;

        RankKeyedFunction(FlatMapFunction<Iterator<T>, U> fn) {
            this.fn = new PartitionFunction<>(fn);
        }

        @Override
        public scala.collection.Iterator<Tuple2<Integer, U>> apply(scala.collection.Iterator<T> rows) {
            TaskContext context = TaskContext.get();
            StageRetry.markRetryable(context);
            Integer rank = context.partitionId();
            return fn.apply(rows).map(u -> new Tuple2<>(rank, u));
        }
    }

    /** The user's Java function as the Scala function Spark's barrier RDD takes. */
    private static final class PartitionFunction<T, U>
            extends AbstractFunction1<scala.collection.Iterator<T>, scala.collection.Iterator<U>> implements Serializable {
        private static final long serialVersionUID = 1L;
        private final FlatMapFunction<Iterator<T>, U> fn;

        PartitionFunction(FlatMapFunction<Iterator<T>, U> fn) {
            this.fn = fn;
        }

        @Override
        public scala.collection.Iterator<U> apply(scala.collection.Iterator<T> rows) {
            try {
                return CollectionConverters.asScala(fn.call(CollectionConverters.asJava(rows)));
            } catch (RuntimeException | Error e) {
                throw e;
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        }
    }
}
