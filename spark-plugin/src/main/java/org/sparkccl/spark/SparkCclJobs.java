package org.sparkccl.spark;

import java.io.Serializable;
import java.util.Iterator;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.function.FlatMapFunction;
import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoder;
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
 */
public final class SparkCclJobs {
    private SparkCclJobs() {
    }

    /** {@code rdd.barrier().mapPartitions(fn)}: every partition runs at once, as one rank each. */
    public static <T, U> JavaRDD<U> barrierMapPartitions(JavaRDD<T> rdd, FlatMapFunction<Iterator<T>, U> fn) {
        SparkConfCheck.checkBarrierStage(rdd.context().getConf(), rdd.getNumPartitions());
        RDD<U> result = rdd.rdd().barrier().mapPartitions(new PartitionFunction<>(fn), false, anyRef());
        return JavaRDD.fromRDD(result, anyRef());
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
