package org.sparkccl.train.gpu;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import org.agrona.BufferUtil;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.DataType;
import org.sparkccl.core.jdk.JdkAccess;
import org.sparkccl.core.MemoryKind;
import org.sparkccl.core.ReduceOp;
import org.sparkccl.ipc.cuda.CudaDevice;
import org.sparkccl.ipc.cuda.CudaEvent;
import org.sparkccl.ipc.cuda.CudaStream;
import org.sparkccl.ipc.cuda.DeviceBuffer;
import org.sparkccl.ipc.cuda.GpuSupport;
import org.sparkccl.ipc.gpu.GpuCommunicator;

/**
 * One rank's data-parallel training on its GPU: the shard's examples, the weights, the gradient and
 * the optimizer state all live in device memory. A step gathers the minibatch's rows on the GPU,
 * runs forward and backward passes (train_kernels.cu), sums the gradient over ranks with the GPU
 * communicator's all-reduce in place in device memory, and applies the optimizer on the GPU. Only
 * the step's two totals (summed loss, row count: they ride at the end of the gradient buffer) come
 * back to the host; weights come back only when asked ({@link #store}), for checkpoints and the
 * result.
 *
 * <p>Where the gradient has more than one bucket (the MLP: one per layer) and the communicator is the
 * GPU one (and no process holds two of its ranks on one GPU), a step overlaps the all-reduce of the
 * output layer's bucket with the backward pass of the hidden layer, as PyTorch's DDP does: that
 * bucket is all-reduced stream-ordered on a stream of its own as soon as its gradient is computed,
 * the hidden layer's once it is (see {@link #step}).
 *
 * <p>Allocates all its device memory when opened and frees it on close: {@code cuMemFree} can wait
 * for the whole GPU, so a rank must close this only after its last collective (ranks of one process
 * that share a GPU would otherwise wait for each other). One thread per trainer.
 */
public final class GpuModelTrainer implements AutoCloseable {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    private static final int FLOAT = 4;

    private final Communicator comm;
    private final GpuNetwork network;
    private final GpuOptimizer optimizer;
    private final CudaDevice device;
    private final String where;
    private final int shardRows;
    private final int maxBatchRows;
    private final int params;
    private final List<AutoCloseable> owned = new ArrayList<>();
    private final CudaStream stream;
    private final TrainKernels kernels;
    private final DeviceBuffer features;
    private final DeviceBuffer labels;
    private final DeviceBuffer batchRows;
    private final DeviceBuffer weights;
    /** The gradient sums, then the batch's summed loss and row count: what the all-reduce sums. */
    private final DeviceBuffer gradient;
    private final DeviceBuffer[] slots;
    private final DeviceBuffer hidden;
    private final DeviceBuffer hiddenGradient;
    private final DeviceBuffer logits;
    private final DeviceBuffer losses;
    /** Host side of the small per-step copies (row indices in, totals out). */
    private final ByteBuffer hostIo;
    /** Overlapped steps only (else null): the communicator, the stream buckets are all-reduced on, and the
     *  event that hands each bucket from the training stream to it. */
    private final GpuCommunicator overlapComm;
    private final CudaStream bucketStream;
    private final CudaEvent bucketReady;
    private boolean closed;

    private GpuModelTrainer(Communicator comm, CudaDevice device, GpuNetwork network, GpuOptimizer optimizer,
                            int shardRows, int maxBatchRows) {
        this.comm = comm;
        this.device = device;
        this.network = network;
        this.optimizer = optimizer;
        this.shardRows = shardRows;
        this.maxBatchRows = maxBatchRows;
        this.params = network.parameterCount();
        this.where = "rank " + comm.rank() + " training " + network + " on " + device.where();
        try {
            this.stream = own(new CudaStream(device, where));
            this.kernels = new TrainKernels(stream, where);
            this.features = allocate((long) shardRows * network.inputs());
            this.labels = allocate(shardRows);
            this.batchRows = allocate(maxBatchRows);
            this.weights = allocate(params);
            this.gradient = allocate(params + 2L);
            this.slots = new DeviceBuffer[optimizer.slotCount()];
            for (int s = 0; s < slots.length; s++) {
                slots[s] = allocate(params);
            }
            this.hidden = allocate((long) maxBatchRows * network.hidden());
            this.hiddenGradient = allocate((long) maxBatchRows * network.hidden());
            this.logits = allocate((long) maxBatchRows * network.classes());
            this.losses = allocate(maxBatchRows);
            this.hostIo = ByteBuffer.allocateDirect(Math.max(maxBatchRows, 2) * FLOAT).order(ByteOrder.nativeOrder());
            // The decision depends on the network, the engine and the communicator's layout only (the same on
            // every rank), so every rank makes the same collectives. Not where a process holds several ranks
            // on one GPU: stream-ordered calls can deadlock there (GpuCommunicator.someProcessSharesAGpu).
            this.overlapComm = network.hasHiddenLayer() && comm instanceof GpuCommunicator gpu
                    && !gpu.someProcessSharesAGpu() ? gpu : null;
            this.bucketStream = overlapComm == null ? null : own(new CudaStream(device, where + " buckets"));
            this.bucketReady = overlapComm == null ? null : own(new CudaEvent(device, where));
        } catch (RuntimeException e) {
            closeOwned(e);
            throw e;
        }
    }

    /**
     * Puts the shard on the GPU and allocates everything a step needs. {@code comm} must be a GPU
     * communicator (its all-reduce takes device addresses) whose rank runs on {@code deviceOrdinal};
     * the shard is {@code labels.length} rows of {@code network.inputs()} features, row-major in
     * {@code features}; a step's minibatch may hold up to {@code maxBatchRows} of them. The weights
     * and optimizer state start at zero: {@link #load} sets them.
     */
    public static GpuModelTrainer open(Communicator comm, int deviceOrdinal, GpuNetwork network, GpuOptimizer optimizer,
                                       float[] features, int[] labels, int maxBatchRows) {
        GpuSupport.require();
        if (comm.memoryKind() != MemoryKind.DEVICE) {
            throw new IllegalArgumentException("rank " + comm.rank() + ": GPU training needs a GPU communicator (one"
                    + " whose all-reduce takes device memory); this one works in " + comm.memoryKind() + " memory");
        }
        int rows = labels.length;
        if (features.length != (long) rows * network.inputs()) {
            throw new IllegalArgumentException("rank " + comm.rank() + ": " + rows + " labels need " + (long) rows
                    * network.inputs() + " features for " + network + ", got " + features.length);
        }
        if (maxBatchRows < 1) {
            throw new IllegalArgumentException("maxBatchRows must be >= 1, got " + maxBatchRows);
        }
        for (int r = 0; r < rows; r++) {
            if (labels[r] < 0 || labels[r] >= network.classes()) {
                throw new IllegalArgumentException("rank " + comm.rank() + ": row " + r + " has label " + labels[r]
                        + ", outside the model's " + network.classes() + " classes; set --classes or check the label"
                        + " column");
            }
        }
        GpuModelTrainer trainer = new GpuModelTrainer(comm, CudaDevice.get(deviceOrdinal), network, optimizer, rows,
                maxBatchRows);
        try {
            // An empty shard still has its (unused) 4 bytes: DeviceBuffer refuses 0.
            DeviceBuffer.copyArrayToDevice(trainer.features.address(), features, (long) features.length * FLOAT,
                    trainer.stream, trainer.where);
            DeviceBuffer.copyArrayToDevice(trainer.labels.address(), labels, (long) rows * FLOAT, trainer.stream,
                    trainer.where);
            for (DeviceBuffer slot : trainer.slots) {
                slot.fill((byte) 0, trainer.stream);
            }
            trainer.weights.fill((byte) 0, trainer.stream);
            return trainer;
        } catch (RuntimeException e) {
            trainer.close();
            throw e;
        }
    }

    public GpuNetwork network() {
        return network;
    }

    /** Sets the weights ({@code network().parameterCount()} floats) and the optimizer's slots (or null to keep them). */
    public void load(float[] newWeights, float[][] newSlots) {
        checkOpen();
        checkLength(newWeights, "weights");
        weights.copyFromArray(newWeights, (long) params * FLOAT, stream);
        if (newSlots != null) {
            checkSlots(newSlots);
            for (int s = 0; s < slots.length; s++) {
                slots[s].copyFromArray(newSlots[s], (long) params * FLOAT, stream);
            }
        }
    }

    /** Copies the weights (and, unless {@code slotsOut} is null, the optimizer's slots) to the host. */
    public void store(float[] weightsOut, float[][] slotsOut) {
        checkOpen();
        checkLength(weightsOut, "weights");
        weights.copyToArray(weightsOut, (long) params * FLOAT, stream);
        if (slotsOut != null) {
            checkSlots(slotsOut);
            for (int s = 0; s < slots.length; s++) {
                slots[s].copyToArray(slotsOut[s], (long) params * FLOAT, stream);
            }
        }
    }

    /**
     * One training step, every rank together: the gradient of this rank's rows {@code localRows[0 ..
     * count)} (indices into the shard), summed over ranks on the devices, divided by the global row
     * count and applied by the optimizer. {@code step} counts from 1 (Adam's bias correction).
     * Fails, before updating, when the ranks' rows do not add up to {@code globalRows}. With two
     * buckets (see the class comment) the gradient is all-reduced in two stream-ordered calls that
     * overlap the hidden layer's backward pass; else in one blocking call after the backward pass.
     *
     * @return the loss summed over the global minibatch (before the update)
     */
    public double step(int[] localRows, int count, int globalRows, long step) {
        float[] totals;
        if (overlapComm != null) {
            totals = overlappedGradient(localRows, count);
        } else {
            computeGradient(localRows, count);
            totals = allReduceGradient();
        }
        if (totals[1] != globalRows) {
            throw new IllegalStateException("rank " + comm.rank() + ", step " + step + ": the ranks hold " + totals[1]
                    + " of the batch's " + globalRows + " rows; the shards do not cover the data");
        }
        applyUpdate(step, totals[1]);
        return totals[0];
    }

    /** This rank's gradient sums over the rows, then their summed loss and row count, into the gradient buffer. */
    void computeGradient(int[] localRows, int count) {
        if (stageRows(localRows, count)) {
            outputLayerGradient(count);
            if (network.hasHiddenLayer()) {
                hiddenLayerGradient(count);
            }
        }
        stream.synchronize();
    }

    /**
     * The output layer's bucket, {@code [outputWeightsAt, parameterCount + 2)} (its gradient, then the
     * loss and row count), is all-reduced on the bucket stream while the hidden layer's backward pass
     * runs on the training stream; then the hidden layer's bucket {@code [0, outputWeightsAt)}. The
     * backward pass writes only the hidden bucket, and reads dZ and the weights, none of which the
     * first all-reduce touches. Returns the global {summed loss, row count}.
     */
    private float[] overlappedGradient(int[] localRows, int count) {
        boolean rows = stageRows(localRows, count);
        long g = gradient.address();
        long outputAt = network.outputWeightsAt();
        if (rows) {
            outputLayerGradient(count);
        }
        bucketReady.record(stream);
        bucketStream.waitFor(bucketReady);
        overlapComm.allReduce(g + outputAt * FLOAT, g + outputAt * FLOAT, params + 2L - outputAt, DataType.FLOAT32,
                ReduceOp.SUM, bucketStream);
        if (rows) {
            hiddenLayerGradient(count);
        }
        bucketReady.record(stream);
        bucketStream.waitFor(bucketReady);
        overlapComm.allReduce(g, g, outputAt, DataType.FLOAT32, ReduceOp.SUM, bucketStream);
        overlapComm.synchronize(bucketStream); // the training stream's work is done too: the bucket stream waited for it
        return totals();
    }

    /**
     * Puts the row indices on the GPU; false when there are none (the gradient buffer is then zeroed,
     * row count 0 included, and nothing more is computed).
     */
    private boolean stageRows(int[] localRows, int count) {
        checkOpen();
        if (count < 0 || count > maxBatchRows || count > localRows.length) {
            throw new IllegalArgumentException(where + ": " + count + " rows in a step; this trainer was opened for at"
                    + " most " + maxBatchRows);
        }
        hostIo.clear();
        for (int i = 0; i < count; i++) {
            int row = localRows[i];
            if (row < 0 || row >= shardRows) {
                throw new IndexOutOfBoundsException(where + ": row " + row + " of a shard of " + shardRows);
            }
            hostIo.putInt(i * FLOAT, row); // the kernels trust these indices
        }
        device.makeCurrent();
        if (count == 0) {
            gradient.fill((byte) 0, stream); // 0.0f everywhere, row count 0 included
            return false;
        }
        batchRows.copyFromHost(0, BufferUtil.address(hostIo), (long) count * FLOAT, stream);
        return true;
    }

    /** Forward pass, loss, the batch totals and the output layer's gradient (queued on the training stream). */
    private void outputLayerGradient(int count) {
        int in = network.inputs();
        int h = network.hidden();
        int c = network.classes();
        long w = weights.address();
        long g = gradient.address();
        long rows = batchRows.address();
        long outW = w + (long) network.outputWeightsAt() * FLOAT;
        long outB = w + (long) network.outputBiasAt() * FLOAT;
        long outWGrad = g + (long) network.outputWeightsAt() * FLOAT;
        long outBGrad = g + (long) network.outputBiasAt() * FLOAT;
        if (network.hasHiddenLayer()) {
            long hiddenW = w + (long) network.hiddenWeightsAt() * FLOAT;
            long hiddenB = w + (long) network.hiddenBiasAt() * FLOAT;
            // H = tanh(X[rows] W1 + b1); Z = H W2 + b2
            kernels.matmul(features.address(), rows, in, false, hiddenW, h, false, hidden.address(), h, hiddenB, true,
                    count, h, in);
            kernels.matmul(hidden.address(), 0, h, false, outW, c, false, logits.address(), c, outB, false, count, c, h);
        } else {
            // Z = X[rows] W + b
            kernels.matmul(features.address(), rows, in, false, outW, c, false, logits.address(), c, outB, false,
                    count, c, in);
        }
        // loss per row; Z becomes dZ = softmax(Z) - onehot(label)
        kernels.softmaxCrossEntropy(logits.address(), c, labels.address(), rows, count, losses.address());
        kernels.batchTotals(losses.address(), count, g + (long) params * FLOAT);
        if (network.hasHiddenLayer()) {
            // dW2 = H^T dZ; db2 = column sums of dZ
            kernels.matmul(hidden.address(), 0, h, true, logits.address(), c, false, outWGrad, c, 0, false, h, c, count);
            kernels.columnSums(logits.address(), count, c, outBGrad);
        } else {
            // dW = X[rows]^T dZ; db = column sums of dZ
            kernels.matmul(features.address(), rows, in, true, logits.address(), c, false, outWGrad, c, 0, false, in,
                    c, count);
            kernels.columnSums(logits.address(), count, c, outBGrad);
        }
    }

    /** The hidden layer's gradient, from dZ (queued on the training stream; MLP only). */
    private void hiddenLayerGradient(int count) {
        int in = network.inputs();
        int h = network.hidden();
        int c = network.classes();
        long g = gradient.address();
        long outW = weights.address() + (long) network.outputWeightsAt() * FLOAT;
        // dH = (dZ W2^T) * (1 - H^2); dW1 = X[rows]^T dH; db1 = column sums of dH
        kernels.matmul(logits.address(), 0, c, false, outW, c, true, hiddenGradient.address(), h, 0, false, count, h, c);
        kernels.tanhBackward(hiddenGradient.address(), hidden.address(), (long) count * h);
        kernels.matmul(features.address(), batchRows.address(), in, true, hiddenGradient.address(), h, false,
                g + (long) network.hiddenWeightsAt() * FLOAT, h, 0, false, in, h, count);
        kernels.columnSums(hiddenGradient.address(), count, h, g + (long) network.hiddenBiasAt() * FLOAT);
    }

    /**
     * Sums the gradient buffer over ranks, in place in device memory (this rank's kernels are done:
     * {@link #computeGradient} waited for them). Returns the global {summed loss, row count}.
     */
    float[] allReduceGradient() {
        checkOpen();
        comm.allReduce(gradient.address(), gradient.address(), params + 2L, DataType.FLOAT32, ReduceOp.SUM);
        return totals();
    }

    /** The {summed loss, row count} at the end of the gradient buffer. */
    private float[] totals() {
        gradient.copyToHost((long) params * FLOAT, BufferUtil.address(hostIo), 2L * FLOAT, stream);
        return new float[] {hostIo.getFloat(0), hostIo.getFloat(FLOAT)};
    }

    /** The optimizer's update with the mean gradient (the summed gradient divided by {@code rows}). */
    void applyUpdate(long step, float rows) {
        checkOpen();
        if (step < 1) {
            throw new IllegalArgumentException("steps count from 1, got " + step);
        }
        device.makeCurrent();
        if (optimizer.kind() == GpuOptimizer.Kind.ADAM) {
            kernels.adam(weights.address(), gradient.address(), slots[0].address(), slots[1].address(), params, rows,
                    optimizer.learningRate(), optimizer.beta1(), optimizer.beta2(), optimizer.epsilon(),
                    1 - Math.pow(optimizer.beta1(), step), 1 - Math.pow(optimizer.beta2(), step));
        } else {
            kernels.momentumSgd(weights.address(), gradient.address(), slots[0].address(), params, rows,
                    (float) optimizer.learningRate(), (float) optimizer.momentum());
        }
        stream.synchronize();
    }

    /** The gradient buffer ({@code parameterCount() + 2} floats: gradient sums, summed loss, row count) to the host. */
    void readGradient(float[] out) {
        checkOpen();
        gradient.copyToArray(out, (params + 2L) * FLOAT, stream);
    }

    /** Sets the gradient buffer (as {@link #readGradient} lays it out), e.g. to test an update alone. */
    void writeGradient(float[] in) {
        checkOpen();
        gradient.copyFromArray(in, (params + 2L) * FLOAT, stream);
    }

    private DeviceBuffer allocate(long floats) {
        return own(DeviceBuffer.allocate(device, Math.max(1, floats) * FLOAT, "rank " + comm.rank() + " training "
                + network));
    }

    private <T extends AutoCloseable> T own(T resource) {
        owned.add(resource);
        return resource;
    }

    private void checkLength(float[] array, String what) {
        if (array.length != params) {
            throw new IllegalArgumentException(where + ": " + what + " of " + array.length + " floats, the network has "
                    + params + " parameters");
        }
    }

    private void checkSlots(float[][] s) {
        if (s.length != slots.length) {
            throw new IllegalArgumentException(where + ": " + s.length + " optimizer slots given, " + optimizer.kind()
                    + " keeps " + slots.length);
        }
        for (float[] slot : s) {
            checkLength(slot, "an optimizer slot");
        }
    }

    private void checkOpen() {
        if (closed) {
            throw new IllegalStateException(where + ": the GPU trainer is closed");
        }
    }

    /** Frees the device memory; call after this rank's last collective (see the class comment). */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        RuntimeException first = closeOwned(null);
        if (first != null) {
            throw first;
        }
    }

    /** Closes what was allocated, newest first; returns {@code first} or the first failure, the rest suppressed. */
    private RuntimeException closeOwned(RuntimeException first) {
        for (int i = owned.size() - 1; i >= 0; i--) {
            try {
                owned.get(i).close();
            } catch (Exception e) {
                RuntimeException r = e instanceof RuntimeException ? (RuntimeException) e
                        : new IllegalStateException(where + ": closing " + owned.get(i) + " failed", e);
                if (first == null) {
                    first = r;
                } else {
                    first.addSuppressed(r);
                }
            }
        }
        owned.clear();
        return first;
    }
}
