package org.sparkccl.ipc.cuda;

import jcuda.driver.CUgraph;
import jcuda.driver.CUgraphExec;
import jcuda.driver.CUstreamCaptureMode;
import jcuda.driver.JCudaDriver;

/**
 * The work one stream was given while it was captured, instantiated as a CUDA graph that can be
 * launched (replayed) many times with one driver call each. Captures in this thread's mode: other
 * threads of the process (other ranks) may go on calling CUDA while this one captures.
 */
public final class CudaGraph extends NativeResource {
    private final CUgraph graph = new CUgraph();
    private final CUgraphExec exec = new CUgraphExec();
    private final String where;

    /** Work queued on a stream (it runs during capture, but only to be recorded). */
    @FunctionalInterface
    public interface Work {
        void run();
    }

    private CudaGraph(CudaDevice device, String where) {
        super(device);
        this.where = where;
    }

    /** Captures what {@code work} queues on {@code stream} and instantiates it. */
    public static CudaGraph capture(CudaStream stream, Work work, String where) {
        CudaGraph g = new CudaGraph(stream.device(), where);
        stream.device().makeCurrent();
        Cuda.check(JCudaDriver.cuStreamBeginCapture(stream.handle(), CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                "cuStreamBeginCapture", where);
        try {
            work.run();
        } catch (RuntimeException | Error e) {
            // End the capture so that the stream is usable again; the partial graph is thrown away.
            if (JCudaDriver.cuStreamEndCapture(stream.handle(), g.graph) == 0) {
                JCudaDriver.cuGraphDestroy(g.graph);
            }
            throw e;
        }
        Cuda.check(JCudaDriver.cuStreamEndCapture(stream.handle(), g.graph), "cuStreamEndCapture", where);
        int rc = JCudaDriver.cuGraphInstantiate(g.exec, g.graph, 0);
        if (rc != 0) {
            JCudaDriver.cuGraphDestroy(g.graph);
            Cuda.check(rc, "cuGraphInstantiate", where);
        }
        return g;
    }

    /** Queues one replay of the captured work on {@code stream}. */
    public void launch(CudaStream stream) {
        Cuda.check(JCudaDriver.cuGraphLaunch(exec, stream.handle()), "cuGraphLaunch", where);
    }

    @Override
    protected void release() {
        destroy(exec, graph, where);
    }

    /** Destroys an instantiated graph, then the graph it was made from (also {@link GraphLaunch}'s). */
    static void destroy(CUgraphExec exec, CUgraph graph, String where) {
        try {
            Cuda.check(JCudaDriver.cuGraphExecDestroy(exec), "cuGraphExecDestroy", where);
        } finally {
            Cuda.check(JCudaDriver.cuGraphDestroy(graph), "cuGraphDestroy", where);
        }
    }
}
