package org.sparkccl.ipc.cuda;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import jcuda.Pointer;
import jcuda.driver.CUDA_KERNEL_NODE_PARAMS;
import jcuda.driver.CUfunction;
import jcuda.driver.CUgraph;
import jcuda.driver.CUgraphExec;
import jcuda.driver.CUgraphNode;
import jcuda.driver.JCudaDriver;
import org.agrona.BufferUtil;
import org.sparkccl.core.jdk.JdkAccess;

/**
 * Kernel launches through one instantiated CUDA graph of a single kernel node, whose kernel, grid and
 * arguments are rewritten before every launch ({@code cuGraphExecKernelNodeSetParams}, then
 * {@code cuGraphLaunch}). Why: queueing a graph costs the host less than queueing a kernel, and the two
 * calls together still do (H100s, scripts/launch_floor.cu: rewrite and graph launch 1.3-2.1 us against a
 * kernel launch of 2.5-3.9 us from C++; a stream-ordered all-reduce queued by one thread 2.1-2.4 us
 * against 3.2-4.0 launched), so one thread queueing this way can keep up with a GPU that takes a small
 * call every 3 us. Two threads queueing into one context at once gain nothing (3.9-5.0 us a call either
 * way: the context's launch path is shared). The rewrite affects only later launches (CUDA copies the
 * arguments), and the launches of one graph run in the order they were queued.
 *
 * <p>The graph is instantiated here, once: instantiating may wait for the GPU's running kernels, which
 * must not happen while a queued collective kernel waits for this thread. Make one before the
 * communicator's first collective. Not thread safe (one per communicator).
 */
public final class GraphLaunch extends NativeResource {
    static {
        JdkAccess.ensureAgronaAccess(); // before this class touches Agrona (see JdkAccess)
    }

    // CUDA_KERNEL_NODE_PARAMS_v2 (cuda.h, CUDA 12): func at 0, gridDim x/y/z at 8, blockDim x/y/z at 20,
    // sharedMemBytes at 32, kernelParams at 40, extra at 48, kern at 56, ctx at 64; 72 bytes. kern and ctx
    // stay 0: the driver then launches func in the current context.
    private static final int PARAMS_BYTES = 72;
    private static final int FUNC = 0;
    private static final int GRID_X = 8;
    private static final int BLOCK_X = 20;
    private static final int KERNEL_PARAMS = 40;

    private final CUgraph graph = new CUgraph();
    private final CUgraphExec exec = new CUgraphExec();
    private final CUgraphNode node = new CUgraphNode();
    private final long execAddress;
    private final long nodeAddress;
    private final ByteBuffer block = ByteBuffer.allocateDirect(PARAMS_BYTES + 8).order(ByteOrder.LITTLE_ENDIAN);
    private final long paramsAddress = BufferUtil.address(block);
    private final String where;
    private long launches;

    /**
     * Builds the graph, its one node a launch of {@code anyKernel} (later launches name their own kernel),
     * on {@code device}; launches will pass {@code kernelArgs} (the kernel's one parameter, a struct in a
     * direct buffer) as it is at each launch.
     */
    public GraphLaunch(CudaDevice device, CUfunction anyKernel, ByteBuffer kernelArgs, String where) {
        super(device);
        String unavailable = unavailable();
        if (unavailable != null) {
            throw new IllegalStateException(unavailable + " (" + where + ")");
        }
        this.where = where;
        device.makeCurrent();
        CUDA_KERNEL_NODE_PARAMS first = new CUDA_KERNEL_NODE_PARAMS();
        first.func = anyKernel;
        first.gridDimX = first.gridDimY = first.gridDimZ = 1;
        first.blockDimX = 32;
        first.blockDimY = first.blockDimZ = 1;
        first.kernelParams = Pointer.to(Pointer.to(kernelArgs));
        Cuda.check(JCudaDriver.cuGraphCreate(graph, 0), "cuGraphCreate", where);
        int rc = JCudaDriver.cuGraphAddKernelNode(node, graph, null, 0, first);
        if (rc == 0) {
            rc = JCudaDriver.cuGraphInstantiate(exec, graph, 0);
        }
        if (rc != 0) {
            JCudaDriver.cuGraphDestroy(graph);
            Cuda.check(rc, "building the one-kernel launch graph (cuGraphAddKernelNode, cuGraphInstantiate)", where);
        }
        execAddress = Cuda.handleAddress(exec);
        nodeAddress = Cuda.handleAddress(node);
        block.putInt(GRID_X + 4, 1);
        block.putInt(GRID_X + 8, 1);
        block.putInt(BLOCK_X + 4, 1);
        block.putInt(BLOCK_X + 8, 1);
        // kernelParams: an array of one pointer, to the argument struct.
        block.putLong(KERNEL_PARAMS, paramsAddress + PARAMS_BYTES);
        block.putLong(PARAMS_BYTES, BufferUtil.address(kernelArgs));
    }

    /** Null where the driver calls this needs can be made, else why not. */
    public static String unavailable() {
        return DriverDirect.Graphs.UNAVAILABLE;
    }

    /** Queues {@code function} on {@code stream}, {@code blocks} blocks of {@code threads}, with the arguments as they are now. */
    public void launch(CUfunction function, int blocks, int threads, CudaStream stream) {
        block.putLong(FUNC, Cuda.handleAddress(function));
        block.putInt(GRID_X, blocks);
        block.putInt(BLOCK_X, threads);
        int rc = DriverDirect.Graphs.cuGraphExecKernelNodeSetParams_v2(execAddress, nodeAddress, paramsAddress);
        if (rc != 0) {
            Cuda.check(rc, "cuGraphExecKernelNodeSetParams(" + blocks + " blocks of " + threads + " threads)", where);
        }
        rc = DriverDirect.Graphs.cuGraphLaunch(execAddress, Cuda.handleAddress(stream.handle()));
        if (rc != 0) {
            Cuda.check(rc, "cuGraphLaunch(one-kernel launch graph)", where);
        }
        launches++;
    }

    /** How many launches went through this graph. */
    public long launches() {
        return launches;
    }

    @Override
    protected void release() {
        CudaGraph.destroy(exec, graph, where);
    }
}
