package org.sparkccl.spark.train;

import org.sparkccl.arrow.GradientBuffer;
import org.sparkccl.core.Communicator;
import org.sparkccl.core.DataType;
import org.sparkccl.core.MemoryKind;
import org.sparkccl.core.ReduceOp;

/** The two collectives training needs, over a communicator or, for the single-process reference, over nothing. */
public interface StepCollectives {
    int rank();

    int size();

    /** In place: the sum over ranks. */
    void allReduceSum(GradientBuffer buffer);

    /** In place: rank 0's values on every rank. */
    void broadcastFromRank0(GradientBuffer buffer);

    /**
     * Over {@code comm}: in place on the buffers' host memory for a host communicator; through the
     * communicator's own (device) staging memory for a GPU one, since the model computes on the CPU.
     */
    static StepCollectives over(Communicator comm) {
        if (comm.memoryKind() != MemoryKind.HOST) {
            return staged(comm);
        }
        return new StepCollectives() {
            @Override
            public int rank() {
                return comm.rank();
            }

            @Override
            public int size() {
                return comm.size();
            }

            @Override
            public void allReduceSum(GradientBuffer buffer) {
                buffer.allReduce(comm, ReduceOp.SUM);
            }

            @Override
            public void broadcastFromRank0(GradientBuffer buffer) {
                buffer.broadcast(comm, 0);
            }
        };
    }

    private static StepCollectives staged(Communicator comm) {
        return new StepCollectives() {
            @Override
            public int rank() {
                return comm.rank();
            }

            @Override
            public int size() {
                return comm.size();
            }

            @Override
            public void allReduceSum(GradientBuffer buffer) {
                if (buffer.dataType() == DataType.FLOAT64) {
                    double[] values = buffer.toDoubleArray();
                    comm.allReduceArray(values, values.length, DataType.FLOAT64, ReduceOp.SUM);
                    buffer.copyFrom(values);
                } else {
                    float[] values = buffer.toFloatArray();
                    comm.allReduceArray(values, values.length, DataType.FLOAT32, ReduceOp.SUM);
                    buffer.copyFrom(values);
                }
            }

            @Override
            public void broadcastFromRank0(GradientBuffer buffer) {
                if (buffer.dataType() == DataType.FLOAT64) {
                    double[] values = buffer.toDoubleArray();
                    comm.broadcastArray(values, values.length, DataType.FLOAT64, 0);
                    buffer.copyFrom(values);
                } else {
                    float[] values = buffer.toFloatArray();
                    comm.broadcastArray(values, values.length, DataType.FLOAT32, 0);
                    buffer.copyFrom(values);
                }
            }
        };
    }

    /** One rank: sums and broadcasts leave the buffer as it is. */
    static StepCollectives singleProcess() {
        return new StepCollectives() {
            @Override
            public int rank() {
                return 0;
            }

            @Override
            public int size() {
                return 1;
            }

            @Override
            public void allReduceSum(GradientBuffer buffer) {
            }

            @Override
            public void broadcastFromRank0(GradientBuffer buffer) {
            }
        };
    }
}
