package org.sparkccl.train;

/** The softmax and cross-entropy pieces both models share. */
final class SoftmaxMath {
    private SoftmaxMath() {
    }

    /**
     * Turns {@code logits} into probabilities in place and returns the cross-entropy of class
     * {@code label}. Subtracts the largest logit first so that exp cannot overflow.
     */
    static double softmaxCrossEntropy(double[] logits, int label) {
        if (label < 0 || label >= logits.length) {
            throw new IllegalArgumentException("label " + label + " is outside the model's " + logits.length
                    + " classes; set --classes or check the label column");
        }
        softmaxInPlace(logits);
        return -Math.log(Math.max(logits[label], 1e-300));
    }

    /** Turns {@code logits} into probabilities in place, the largest logit subtracted first so that exp cannot overflow. */
    static void softmaxInPlace(double[] logits) {
        double max = Double.NEGATIVE_INFINITY;
        for (double z : logits) {
            max = Math.max(max, z);
        }
        double sum = 0;
        for (int c = 0; c < logits.length; c++) {
            logits[c] = Math.exp(logits[c] - max);
            sum += logits[c];
        }
        for (int c = 0; c < logits.length; c++) {
            logits[c] /= sum;
        }
    }

    /** Index of the largest value (the first of equals). */
    static int argmax(double[] values) {
        int best = 0;
        for (int c = 1; c < values.length; c++) {
            if (values[c] > values[best]) {
                best = c;
            }
        }
        return best;
    }
}
