/**
 * Arrow-backed training state for sparkccl: no Spark here, and no CUDA beyond what a registered
 * {@link org.sparkccl.core.memory.HostMemorySource} brings.
 *
 * <ul>
 *   <li>{@link org.sparkccl.arrow.GradientBuffer}: named tensors ({@link org.sparkccl.arrow.TensorLayout})
 *       flattened into one Arrow vector, all-reduced in place;</li>
 *   <li>{@link org.sparkccl.arrow.Checkpoint}: weights, the optimizer's named slots (each a
 *       GradientBuffer shaped like the weights), step and metadata as an Arrow IPC file through
 *       Hadoop's FileSystem.</li>
 * </ul>
 *
 * <pre>{@code
 * TensorLayout layout = TensorLayout.builder().add("fc1.weight", 128, 784).add("fc1.bias", 128).build();
 * try (BufferAllocator allocator = new RootAllocator();
 *      GradientBuffer grads = GradientBuffer.allocate(allocator, layout)) {
 *     grads.tensor("fc1.bias").copyFrom(localBiasGradient);
 *     grads.allReduce(communicator, ReduceOp.AVG);        // in place, on the ArrowBuf's memory
 * }
 * }</pre>
 *
 * See docs/arrow-bridge.md for the formats.
 */
package org.sparkccl.arrow;
