package org.sparkccl.core.topo;

import java.util.Locale;

/**
 * A PCIe link as sysfs describes it: transfer rate per lane in GT/s and the number of lanes.
 * {@link #bandwidthGBps()} is the payload rate in one direction after line encoding (8b/10b up to
 * 5 GT/s, 128b/130b from 8 GT/s, FLIT mode at 64 GT/s), before packet overheads.
 */
public record PciLink(double gigaTransfersPerSecond, int width) {

    public PciLink {
        if (!(gigaTransfersPerSecond > 0) || width <= 0) {
            throw new IllegalArgumentException("a PCIe link needs a positive speed and width, got "
                    + gigaTransfersPerSecond + " GT/s x" + width);
        }
    }

    public double bandwidthGBps() {
        double encoding = gigaTransfersPerSecond <= 5.0 ? 8.0 / 10.0
                : gigaTransfersPerSecond < 64.0 ? 128.0 / 130.0 : 242.0 / 256.0;
        return gigaTransfersPerSecond * width * encoding / 8.0;
    }

    /**
     * Parses sysfs' speed text ({@code "16.0 GT/s PCIe"}, {@code "8 GT/s"}, {@code "2.5 GT/s"}) and
     * width text; null where either is missing, unknown or zero (a link that is down).
     */
    public static PciLink parse(String speedText, String widthText) {
        if (speedText == null || widthText == null) {
            return null;
        }
        String s = speedText.trim();
        int end = 0;
        while (end < s.length() && (Character.isDigit(s.charAt(end)) || s.charAt(end) == '.')) {
            end++;
        }
        try {
            double speed = Double.parseDouble(s.substring(0, end));
            int width = Integer.parseInt(widthText.trim());
            return speed > 0 && width > 0 ? new PciLink(speed, width) : null;
        } catch (NumberFormatException e) {
            return null;
        }
    }

    /** {@code 16 GT/s x8}: the form the topology file and the tool use. */
    @Override
    public String toString() {
        return formatSpeed(gigaTransfersPerSecond) + " GT/s x" + width;
    }

    /** {@code 16x8}: the compact form of the topology file. */
    public String toFileText() {
        return formatSpeed(gigaTransfersPerSecond) + "x" + width;
    }

    public static PciLink fromFileText(String text) {
        int x = text.indexOf('x');
        if (x <= 0) {
            throw new IllegalArgumentException("expected a link as SPEEDxWIDTH (e.g. 16x16), got '" + text + "'");
        }
        return new PciLink(Double.parseDouble(text.substring(0, x)), Integer.parseInt(text.substring(x + 1)));
    }

    static String formatSpeed(double gts) {
        return gts == Math.rint(gts) ? Long.toString((long) gts) : String.format(Locale.ROOT, "%s", gts);
    }
}
