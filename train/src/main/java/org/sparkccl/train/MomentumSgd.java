package org.sparkccl.train;

/** SGD with (heavy-ball) momentum: {@code v = mu v + g; w -= lr v}. */
public final class MomentumSgd implements Optimizer {
    private final float learningRate;
    private final float momentum;

    public MomentumSgd(double learningRate, double momentum) {
        this.learningRate = (float) learningRate;
        this.momentum = (float) momentum;
    }

    @Override
    public String[] slotNames() {
        return new String[] {"momentum"};
    }

    @Override
    public void update(float[] w, float[] g, float[][] slots, long step) {
        float[] v = slots[0];
        for (int i = 0; i < w.length; i++) {
            v[i] = momentum * v[i] + g[i];
            w[i] -= learningRate * v[i];
        }
    }
}
