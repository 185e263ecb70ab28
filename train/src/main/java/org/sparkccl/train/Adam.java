package org.sparkccl.train;

/** Adam (Kingma and Ba), with bias correction. */
public final class Adam implements Optimizer {
    private final double learningRate;
    private final double beta1;
    private final double beta2;
    private final double epsilon;

    public Adam(double learningRate, double beta1, double beta2, double epsilon) {
        this.learningRate = learningRate;
        this.beta1 = beta1;
        this.beta2 = beta2;
        this.epsilon = epsilon;
    }

    @Override
    public String[] slotNames() {
        return new String[] {"m", "v"};
    }

    @Override
    public void update(float[] w, float[] g, float[][] slots, long step) {
        float[] m = slots[0];
        float[] v = slots[1];
        double correction1 = 1 - Math.pow(beta1, step);
        double correction2 = 1 - Math.pow(beta2, step);
        for (int i = 0; i < w.length; i++) {
            m[i] = (float) (beta1 * m[i] + (1 - beta1) * g[i]);
            v[i] = (float) (beta2 * v[i] + (1 - beta2) * g[i] * g[i]);
            double mHat = m[i] / correction1;
            double vHat = v[i] / correction2;
            w[i] -= (float) (learningRate * mHat / (Math.sqrt(vHat) + epsilon));
        }
    }
}
