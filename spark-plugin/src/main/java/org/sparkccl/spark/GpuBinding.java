package org.sparkccl.spark;

import java.io.Serializable;
import java.util.Arrays;

/**
 * Which GPU a rank drives, and where that choice came from. On a cluster Spark assigns it
 * ({@code TaskContext.resources().get("gpu")}, one address per task); Spark's local mode assigns
 * none, so there rank r takes GPU r mod the number of visible GPUs, as XGBoost4J-Spark does.
 */
public final class GpuBinding implements Serializable {
    private static final long serialVersionUID = 1L;

    /** Where the GPU came from. */
    public enum Source {
        /** Spark gave the task this GPU (spark.task.resource.gpu.amount). */
        SPARK,
        /** Local mode: rank mod visible GPUs. */
        LOCAL_ROUND_ROBIN,
        /** No GPU: the rank works in host memory. */
        NONE
    }

    private final String address;
    private final Source source;

    private GpuBinding(String address, Source source) {
        this.address = address;
        this.source = source;
    }

    public static GpuBinding none() {
        return new GpuBinding(null, Source.NONE);
    }

    /**
     * Decides the GPU of rank {@code rank} of {@code size}.
     *
     * @param sparkGpus     the task's GPU addresses from Spark, or null when Spark gave it none
     * @param localMode     Spark runs in local mode (no resources are ever assigned)
     * @param visibleGpus   GPUs this process can use (0 without CUDA)
     * @param allowShared   spark.sparkccl.allowSharedGpu
     */
    public static GpuBinding decide(int rank, int size, String[] sparkGpus, boolean localMode, int visibleGpus,
                                    boolean allowShared) {
        if (sparkGpus != null && sparkGpus.length > 0) {
            if (sparkGpus.length > 1) {
                throw new IllegalStateException("rank " + rank + ": Spark gave this task " + sparkGpus.length
                        + " GPUs " + Arrays.toString(sparkGpus) + ", and a sparkccl rank drives exactly one: set "
                        + SparkConfCheck.TASK_GPU_AMOUNT + "=1 and run one barrier task per GPU.");
            }
            String address = sparkGpus[0].trim();
            if (!address.matches("\\d+")) {
                throw new IllegalStateException("rank " + rank + ": Spark gave this task GPU '" + address
                        + "', which is not a device index; the GPU discovery script must print indices as"
                        + " nvidia-smi numbers them (scripts/getGpusResources.sh does).");
            }
            return new GpuBinding(address, Source.SPARK);
        }
        if (localMode && visibleGpus > 0) {
            if (size > visibleGpus && !allowShared) {
                throw new IllegalStateException("rank " + rank + ": the barrier stage has " + size + " tasks and this"
                        + " process sees " + visibleGpus + " GPU(s); in local mode rank r takes GPU r mod "
                        + visibleGpus + ", so ranks would share GPUs. Use at most " + visibleGpus
                        + " partitions, or set " + SparkCclSettings.ALLOW_SHARED_GPU.sparkConfKey()
                        + "=true to let them share.");
            }
            return new GpuBinding(Integer.toString(rank % visibleGpus), Source.LOCAL_ROUND_ROBIN);
        }
        return none();
    }

    /** The GPU's address (a device index), or null. */
    public String address() {
        return address;
    }

    public boolean hasGpu() {
        return address != null;
    }

    /** The CUDA device ordinal; only when {@link #hasGpu()}. */
    public int ordinal() {
        if (address == null) {
            throw new IllegalStateException("no GPU bound");
        }
        return Integer.parseInt(address);
    }

    public Source source() {
        return source;
    }

    @Override
    public String toString() {
        return address == null ? "no GPU" : "GPU " + address + " (" + (source == Source.SPARK
                ? "from Spark" : "local mode: rank mod visible GPUs") + ")";
    }
}
